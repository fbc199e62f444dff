// The flag table (config/flags.h) against gflags, which keeps the values:
// a row for every flag of ours, each where gflags keeps it, in groups that
// --help can show in one run each.
#include "lockcached/config/flags.h"

#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "lockcached/config/checks.h"

namespace lockcached::config {
namespace {

const void* address_of(const Storage& storage) {
  return std::visit(
      [](auto value) -> const void* {
        if constexpr (std::is_pointer_v<decltype(value)>) {
          return value;
        } else {
          return nullptr;
        }
      },
      storage);
}

TEST(FlagTableTest, EveryRowIsAFlagThatGflagsKeepsWhereTheRowSays) {
  for (const Flag& flag : flags()) {
    gflags::CommandLineFlagInfo info;
    ASSERT_TRUE(gflags::GetCommandLineFlagInfo(std::string(flag.name).c_str(), &info))
        << flag.name;
    if (flag.name == "flagfile") continue;  // gflags' own, read by the flag loader
    EXPECT_EQ(address_of(flag.storage), info.flag_ptr) << flag.name;
  }
}

TEST(FlagTableTest, EveryFlagDefinedWithTheTableHasARow) {
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  int ours = 0;
  for (const gflags::CommandLineFlagInfo& info : all) {
    if (!info.filename.ends_with("config/flags.cc")) continue;
    ++ours;
    EXPECT_NE(find_flag(info.name), nullptr) << info.name;
  }
  EXPECT_GT(ours, 50);
}

// The README says the shipped flagfile lists every flag: each of ours is
// there, set (`--name=...`) or as a commented example (`#--name...`).
TEST(FlagTableTest, TheShippedFlagfileListsEveryFlagOfOurs) {
  std::ifstream file(LOCKCACHED_SOURCE_DIR "/etc/lockcached.conf");
  ASSERT_TRUE(file) << "etc/lockcached.conf";
  std::stringstream text;
  text << file.rdbuf();
  std::set<std::string> listed;
  const std::regex line(R"(^#?--([a-z0-9_]+)(=|$))", std::regex::multiline);
  const std::string conf = text.str();
  for (std::sregex_iterator it(conf.begin(), conf.end(), line), end; it != end; ++it)
    listed.insert((*it)[1]);
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  for (const gflags::CommandLineFlagInfo& info : all) {
    if (!info.filename.ends_with("config/flags.cc")) continue;
    EXPECT_TRUE(listed.contains(info.name)) << "--" << info.name << " is not in etc/lockcached.conf";
  }
}

TEST(FlagTableTest, EachHelpGroupIsOneRun) {
  std::set<std::string_view> finished;
  std::string_view group;
  for (const Flag& flag : flags()) {
    if (flag.group == group) continue;
    EXPECT_TRUE(finished.insert(group).second) << flag.group << " again at --" << flag.name;
    group = flag.group;
  }
}

TEST(FlagTableTest, TheDefaultsPassTheirChecks) {
  for (const Flag& flag : flags()) {
    if (flag.check) {
      EXPECT_EQ(flag.check(value_of(flag)), "") << flag.name;
    }
  }
}

// SIGHUP checks a file's values without setting them (the server runs on
// the flags in force): value_from_text must take what gflags takes, as it
// takes it.
TEST(FlagTableTest, ValueFromTextTakesWhatGflagsTakes) {
  gflags::FlagSaver saver;
  const std::pair<std::string, std::vector<std::string>> cases[] = {
      {"tls", {"true", "FALSE", "Yes", "n", "1", "0", "t", "bogus", "", " true", "2"}},
      {"port", {"1", "0x10", "0X1f", "-5", "2147483647", "2147483648", "abc", "", "12 ", " 12",
                "+7", "0x", "010"}},
      {"max_item_size", {"1048576", "9223372036854775807", "9223372036854775808", "1e6", "abc"}},
      {"node_id", {"1", "-1", " 5", "0x10", "18446744073709551616", ""}},
      {"listen", {"", "127.0.0.1", "anything at all"}},
      {"minloglevel", {"2", "x"}},  // glog's, without a row
  };
  for (const auto& [name, texts] : cases) {
    for (const std::string& text : texts) {
      bool taken = !gflags::SetCommandLineOption(name.c_str(), text.c_str()).empty();
      std::optional<Value> value = value_from_text(name, text);
      EXPECT_EQ(value.has_value(), taken) << name << "=" << text;
      if (const Flag* flag = find_flag(name); flag != nullptr && taken && value) {
        EXPECT_EQ(*value, value_of(*flag)) << name << "=" << text;
      }
    }
  }
  EXPECT_FALSE(value_from_text("no_such_flag", "1"));
}

// config::reloaded parses what SIGHUP re-reads as whole numbers.
TEST(FlagTableTest, SighupRereadsWholeNumbers) {
  for (const Flag& flag : flags()) {
    if (flag.reload == Reload::kOnSighup) {
      EXPECT_TRUE(std::holds_alternative<int32_t*>(flag.storage)) << flag.name;
    }
  }
}

TEST(FlagTableTest, MemcachedSpellingsNameOneFlagEach) {
  std::set<std::string_view> spelled;
  for (const Flag& flag : flags()) {
    std::string_view option = flag.memcached;
    if (option.empty()) continue;
    EXPECT_TRUE((option.size() == 2 && option[0] == '-') || option.starts_with("-o "))
        << option;
    // -D sets both the delimiter and stats_detail.
    if (option != "-D") {
      EXPECT_TRUE(spelled.insert(option).second) << option;
    }
  }
  EXPECT_EQ(flag_spelled("-p")->name, "port");
  EXPECT_EQ(flag_spelled("-o idle_timeout")->name, "idle_timeout");
  EXPECT_EQ(flag_spelled("-q"), nullptr);
}

TEST(FlagTableTest, ChecksSayWhatIsAllowed) {
  EXPECT_EQ(between(0, 65535)(int64_t{70000}), "must be 0..65535");
  EXPECT_EQ(between(-1, 65535)(int64_t{-1}), "");
  EXPECT_EQ(at_least(0)(int64_t{-1}), "must be 0 or more");
  EXPECT_EQ(at_least(1)(int64_t{0}), "must be at least 1");
  EXPECT_EQ(one_of({"epoll", "uring"})(std::string("poll")), "must be epoll or uring");
  EXPECT_EQ(one_of({"auto", "ascii", "binary"})(std::string("text")),
            "must be auto, ascii or binary");
  EXPECT_EQ(one_of({"auto", "ascii", "binary"})(std::string("ascii")), "");
  EXPECT_EQ(text_check(one_character_problem)(std::string("ab")), "must be one character");
}

}  // namespace
}  // namespace lockcached::config
