#include "lockcached/config/usage.h"

#include <gflags/gflags.h>

namespace lockcached::config {
namespace {

// Wraps `text` at about 76 columns, each line indented by `indent`.
std::string wrapped(const std::string& text, const std::string& indent) {
  constexpr size_t kWidth = 76;
  std::string out, line;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    std::string word = text.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && indent.size() + line.size() + 1 + word.size() > kWidth) {
      out += indent + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out += indent + line + "\n";
  return out;
}

std::string describe(const Flag& flag) {
  gflags::CommandLineFlagInfo info;
  if (!gflags::GetCommandLineFlagInfo(std::string(flag.name).c_str(), &info)) return "";
  std::string spelled = "  --" + info.name;
  if (info.type == "string") {
    spelled += "=\"" + info.default_value + "\"";
  } else {
    spelled += "=" + info.default_value;
  }
  return spelled + "\n" +
         wrapped(flag.help.empty() ? info.description : std::string(flag.help), "      ");
}

}  // namespace

std::string usage_text(const std::string& intro, std::span<const Flag> flags,
                       const std::string& outro) {
  std::string text = intro + "\n";
  std::string_view group;
  for (const Flag& flag : flags) {
    if (flag.group != group) text += "\n" + std::string(group = flag.group) + ":\n";
    text += describe(flag);
  }
  return text + "\n" + outro;
}

}  // namespace lockcached::config
