// memcached's command-line options translated into lockcached's gflags flags.
#include "lockcached/config/command_line.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace lockcached::config {
namespace {

using Args = std::vector<std::string>;

// The gflags flags a single-dash argument may name in these tests.
bool fake_gflag(std::string_view name) {
  static const std::set<std::string_view> known = {
      "port",          "listen", "threads",  "user",          "logtostderr",
      "nologtostderr", "v",      "flagfile", "max-item-size", "help"};
  return known.contains(name);
}

TranslatedCommandLine translate(Args args) {
  args.insert(args.begin(), "lockcached");
  return translate_memcached_options(args, fake_gflag);
}

// The translated arguments after the program name, or the error.
Args translated(const Args& args) {
  TranslatedCommandLine result = translate(args);
  if (!result.error.empty()) return {"error: " + result.error};
  EXPECT_EQ(result.args.at(0), "lockcached");
  return Args(result.args.begin() + 1, result.args.end());
}

TEST(CommandLineTest, SeparateValuesMapOntoFlags) {
  EXPECT_EQ(translated({"-p", "11311", "-m", "64", "-c", "100", "-t", "2", "-u", "nobody"}),
            (Args{"--port=11311", "--memory_limit_mb=64", "--max_connections=100", "--threads=2",
                  "--user=nobody"}));
}

TEST(CommandLineTest, JoinedValuesAsGetoptTakesThem) {
  EXPECT_EQ(translated({"-p11211", "-m64", "-c100", "-t2", "-l127.0.0.1", "-unobody"}),
            (Args{"--port=11211", "--memory_limit_mb=64", "--max_connections=100", "--threads=2",
                  "--listen=127.0.0.1", "--user=nobody"}));
}

TEST(CommandLineTest, BundledLettersAndValueLast) {
  EXPECT_EQ(translated({"-vp", "0"}), (Args{"--v=1", "--port=0"}));
  EXPECT_EQ(translated({"-vvp11211"}), (Args{"--v=1", "--v=2", "--port=11211"}));
}

TEST(CommandLineTest, VerbosityCountsEveryV) {
  EXPECT_EQ(translated({"-v"}), (Args{"--v=1"}));
  EXPECT_EQ(translated({"-vv"}), (Args{"--v=1", "--v=2"}));
  EXPECT_EQ(translated({"-v", "-vv"}), (Args{"--v=1", "--v=2", "--v=3"}));
  EXPECT_EQ(translated({"--verbose"}), (Args{"--v=1"}));
  // memcached's getopt takes a value after '=' and ignores it: one -v each.
  EXPECT_EQ(translated({"--verbose=2"}), (Args{"--v=1"}));
  EXPECT_EQ(translated({"--verbose=abc", "--verbose"}), (Args{"--v=1", "--v=2"}));
}

TEST(CommandLineTest, ItemSizeTakesKAndMSuffixes) {
  EXPECT_EQ(translated({"-I", "2m"}), (Args{"--max_item_size=2097152"}));
  EXPECT_EQ(translated({"-I512k"}), (Args{"--max_item_size=524288"}));
  EXPECT_EQ(translated({"-I", "4M"}), (Args{"--max_item_size=4194304"}));
  EXPECT_EQ(translated({"-I", "1048576"}), (Args{"--max_item_size=1048576"}));
  EXPECT_EQ(translated({"--max-item-size=1m"}), (Args{"--max_item_size=1048576"}));
  EXPECT_EQ(translated({"-I", "2g"})[0].substr(0, 12), "error: -I 2g");
  EXPECT_EQ(translated({"-I", "m"})[0].substr(0, 11), "error: -I m");
}

TEST(CommandLineTest, ListenAccumulatesLikeMemcached) {
  EXPECT_EQ(translated({"-l", "127.0.0.1,::1"}), (Args{"--listen=127.0.0.1,::1"}));
  EXPECT_EQ(translated({"-l", "127.0.0.1", "-l", "[::1]"}),
            (Args{"--listen=127.0.0.1", "--listen=127.0.0.1,[::1]"}));
  EXPECT_EQ(translated({"-l", "10.0.0.1;10.0.0.2"}), (Args{"--listen=10.0.0.1,10.0.0.2"}));
}

// --listen has memcached's syntax: the entries go through as given.
TEST(CommandLineTest, ListenKeepsPortsAndNotls) {
  EXPECT_EQ(translated({"-l", "127.0.0.1:11211"}), (Args{"--listen=127.0.0.1:11211"}));
  EXPECT_EQ(translated({"-l", "notls:[::1]:5", "-l", "*"}),
            (Args{"--listen=notls:[::1]:5", "--listen=notls:[::1]:5,*"}));
  EXPECT_EQ(translated({"--listen=127.0.0.1:1"}), (Args{"--listen=127.0.0.1:1"}));  // gflags'
  EXPECT_EQ(translated({"-l", "127.0.0.1:99999"})[0],
            "error: -l 127.0.0.1:99999: the port must be a number from 0 to 65535");
  EXPECT_EQ(translated({"-l", "[::1"})[0], "error: -l [::1: missing ']'");
  EXPECT_EQ(translated({"-l", ","})[0], "error: -l needs at least one address");
}

TEST(CommandLineTest, UnixSocketAndItsMask) {
  EXPECT_EQ(translated({"-s", "/run/x.sock", "-a", "0770"}),
            (Args{"--unix_socket=/run/x.sock", "--unix_socket_mask=0770"}));
  EXPECT_EQ(translated({"-s/run/x.sock", "-a770"}),
            (Args{"--unix_socket=/run/x.sock", "--unix_socket_mask=770"}));
  EXPECT_EQ(translated({"--unix-socket=/run/x.sock", "--unix-mask", "700"}),
            (Args{"--unix_socket=/run/x.sock", "--unix_socket_mask=700"}));
  EXPECT_EQ(translated({"-s", ""})[0], "error: -s needs a file name");
}

TEST(CommandLineTest, UdpPortIsAcceptedAndWarnedAboutUnlessZero) {
  TranslatedCommandLine off = translate({"-U", "0"});
  EXPECT_TRUE(off.error.empty());
  EXPECT_EQ(off.args, (Args{"lockcached"}));
  EXPECT_TRUE(off.warnings.empty());

  TranslatedCommandLine on = translate({"-U11211", "--udp-port=5"});
  EXPECT_TRUE(on.error.empty());
  EXPECT_EQ(on.args, (Args{"lockcached"}));
  ASSERT_EQ(on.warnings.size(), 2u);
  EXPECT_NE(on.warnings[0].find("-U 11211 ignored"), std::string::npos);
  EXPECT_NE(on.warnings[1].find("--udp-port 5 ignored"), std::string::npos);
}

TEST(CommandLineTest, MemcachedLongOptions) {
  EXPECT_EQ(translated({"--memory-limit=64", "--conn-limit", "10"}),
            (Args{"--memory_limit_mb=64", "--max_connections=10"}));
  // The same names and meaning as gflags flags: left to gflags.
  EXPECT_EQ(translated({"--port=1", "--listen", "::1", "--threads=2", "--user=x"}),
            (Args{"--port=1", "--listen", "::1", "--threads=2", "--user=x"}));
}

TEST(CommandLineTest, GflagsFormsPassThrough) {
  Args gflags_style = {"--port=0",     "--lock_port=-1", "-logtostderr", "-nologtostderr",
                       "-v=2",         "-port=5",        "-flagfile",    "/etc/x.conf",
                       "--flagfile=y", "-help",          "positional"};
  EXPECT_EQ(translated(gflags_style), gflags_style);
}

TEST(CommandLineTest, EverythingAfterDoubleDashPassesThrough) {
  EXPECT_EQ(translated({"-p", "1", "--", "-d", "-x"}), (Args{"--port=1", "--", "-d", "-x"}));
}

// Debian's /etc/memcached.conf carries both.
TEST(CommandLineTest, DaemonAndPidFileMapOntoFlags) {
  EXPECT_EQ(translated({"-d", "-P", "/run/m.pid"}),
            (Args{"--daemonize=true", "--pid_file=/run/m.pid"}));
  EXPECT_EQ(translated({"-vdP/run/m.pid"}),
            (Args{"--v=1", "--daemonize=true", "--pid_file=/run/m.pid"}));
  EXPECT_EQ(translated({"--daemon", "--pidfile=/p"}), (Args{"--daemonize=true", "--pid_file=/p"}));
  EXPECT_EQ(translate({"-P"}).error, "-P needs a value");
  EXPECT_EQ(translate({"--daemon=yes"}).error, "--daemon takes no value");
}

TEST(CommandLineTest, UnknownOptionsAreErrors) {
  EXPECT_EQ(translate({"-x"}).error, "unknown option -x (see --help)");
  EXPECT_EQ(translate({"-o", "ssl_key=k,bogus=20"}).error,
            "memcached's option -o bogus is not supported by lockcached");
}

// memcached's switches with a meaning here: a boolean flag each.
TEST(CommandLineTest, SwitchesMapOntoFlags) {
  EXPECT_EQ(translated({"-A", "-C", "-F", "-X", "-W", "-M", "-k", "-r"}),
            (Args{"--enable_shutdown=true", "--disable_cas=true", "--disable_flush_all=true",
                  "--disable_dumping=true", "--disable_watch=true", "--disable_evictions=true",
                  "--lock_memory=true", "--enable_coredumps=true"}));
  EXPECT_EQ(translated({"-CFXW"}), (Args{"--disable_cas=true", "--disable_flush_all=true",
                                         "--disable_dumping=true", "--disable_watch=true"}));
  EXPECT_EQ(translated({"--enable-shutdown", "--disable-cas", "--disable-flush-all",
                        "--disable-dumping", "--disable-watch", "--disable-evictions",
                        "--lock-memory", "--enable-coredumps"}),
            (Args{"--enable_shutdown=true", "--disable_cas=true", "--disable_flush_all=true",
                  "--disable_dumping=true", "--disable_watch=true", "--disable_evictions=true",
                  "--lock_memory=true", "--enable_coredumps=true"}));
  EXPECT_EQ(translate({"--disable-cas=1"}).error, "--disable-cas takes no value");
}

TEST(CommandLineTest, ValuedOptionsWithAMeaning) {
  EXPECT_EQ(translated({"-b", "64", "-R5", "-B", "binary", "-D", "/"}),
            (Args{"--listen_backlog=64", "--max_reqs_per_event=5", "--protocol=binary",
                  "--stats_prefix_delimiter=/", "--stats_detail=true"}));
  EXPECT_EQ(translated({"--listen-backlog=8", "--max-reqs-per-event", "1", "--protocol=ascii"}),
            (Args{"--listen_backlog=8", "--max_reqs_per_event=1", "--protocol=ascii"}));
  // memcached takes -D's first character.
  EXPECT_EQ(translated({"-Dab"}), (Args{"--stats_prefix_delimiter=a", "--stats_detail=true"}));
  EXPECT_EQ(translated({"-o", "idle_timeout=10"}), (Args{"--idle_timeout=10"}));
  EXPECT_EQ(translated({"-o", "no_lru_crawler", "-o", "lru_crawler,watcher_logbuf_size=64"}),
            (Args{"--lru_crawler=false", "--lru_crawler=true", "--watch_buffer_kb=64"}));
  EXPECT_EQ(translate({"-B", "text"}).error, "-B text: expected ascii, binary or auto");
  EXPECT_EQ(translate({"-R", "0"}).error, "-R 0: expected a whole number from 1 to 2147483647");
  EXPECT_EQ(translate({"-b", "x"}).error, "-b x: expected a whole number from 1 to 2147483647");
  EXPECT_EQ(translate({"-D", ""}).error, "-D needs a delimiter character");
}

TEST(CommandLineTest, LicenseLetter) {
  EXPECT_EQ(translated({"-i"}), (Args{"--license"}));
  EXPECT_EQ(translated({"--license"}), (Args{"--license"}));
}

// Options of memcached's own machinery: dropped, one warning each saying why.
TEST(CommandLineTest, OptionsWithoutEffectAreDroppedWithAWarning) {
  TranslatedCommandLine result =
      translate({"-f", "1.1", "-n48", "-L", "-N", "2", "-o", "hashpower=20,slab_reassign",
                 "-o", "slab_automove=2,lru_maintainer,ext_path=/mnt/x:1G", "--slab-growth-factor=2"});
  ASSERT_EQ(result.error, "");
  EXPECT_EQ(result.args, (Args{"lockcached"}));
  std::vector<std::string> named;
  for (const std::string& warning : result.warnings)
    named.push_back(warning.substr(0, warning.find(" ignored: ")));
  EXPECT_EQ(named, (std::vector<std::string>{"-f 1.1", "-n 48", "-L", "-N 2", "-o hashpower=20",
                                             "-o slab_reassign", "-o slab_automove=2",
                                             "-o lru_maintainer", "-o ext_path=/mnt/x:1G",
                                             "--slab-growth-factor 2"}));
  EXPECT_NE(result.warnings[0].find("no slab classes"), std::string::npos) << result.warnings[0];
}

// What lockcached always does needs no warning.
TEST(CommandLineTest, OptionsAskingForWhatLockcachedDoesAreSilent) {
  TranslatedCommandLine result =
      translate({"-o", "maxconns_fast,modern,track_sizes,ssl_session_cache"});
  EXPECT_EQ(result.error, "");
  EXPECT_EQ(result.args, (Args{"lockcached"}));
  EXPECT_TRUE(result.warnings.empty());
}

// The values memcached refuses stop lockcached too.
TEST(CommandLineTest, OptionsWithoutEffectCheckTheirValues) {
  EXPECT_EQ(translate({"-f", "1"}).error, "-f 1: expected a number above 1, at most 1000000000");
  EXPECT_EQ(translate({"-n", "0"}).error, "-n 0: expected a whole number from 1 to 2147483647");
  EXPECT_EQ(translate({"-o", "hashpower=8"}).error,
            "-o hashpower=8: expected a whole number from 12 to 32");
  EXPECT_EQ(translate({"-o", "hashpower"}).error,
            "-o hashpower: expected a whole number from 12 to 32");
  EXPECT_EQ(translate({"-o", "hash_algorithm=md5"}).error,
            "-o hash_algorithm=md5: expected one of: jenkins murmur3 xxh3");
  EXPECT_EQ(translate({"-o", "slab_automove_ratio=0"}).error,
            "-o slab_automove_ratio=0: expected a number above 0, at most 1");
  EXPECT_EQ(translate({"-o", "ext_path"}).error, "-o ext_path: expected a value");
  EXPECT_EQ(translate({"-o", "ssl_keyformat=2"}).error, "-o ssl_keyformat=2: expected one of: 1");
  EXPECT_EQ(translate({"-o", "slab_automove"}).error, "");
}

// memcached's warm restart: -e FILE.
TEST(CommandLineTest, MemoryFileTranslates) {
  EXPECT_EQ(translated({"-e", "/dev/shm/cache"}), (Args{"--memory_file=/dev/shm/cache"}));
  EXPECT_EQ(translated({"-e/c"}), (Args{"--memory_file=/c"}));
  EXPECT_EQ(translated({"--memory-file=/c"}), (Args{"--memory_file=/c"}));
  EXPECT_EQ(translate({"-e"}).error, "-e needs a value");
  EXPECT_EQ(translate({"-e", ""}).error, "-e needs a file name");
}

// memcached's authentication: -Y FILE and -S (main refuses -S alone).
TEST(CommandLineTest, AuthOptionsTranslate) {
  EXPECT_EQ(translated({"-Y", "/etc/users", "-S"}),
            (Args{"--auth_file=/etc/users", "--enable_sasl=true"}));
  EXPECT_EQ(translated({"-SY/u"}), (Args{"--enable_sasl=true", "--auth_file=/u"}));
  EXPECT_EQ(translated({"--auth-file=/u", "--enable-sasl"}),
            (Args{"--auth_file=/u", "--enable_sasl=true"}));
  EXPECT_EQ(translate({"-Y"}).error, "-Y needs a value");
  EXPECT_EQ(translate({"--enable-sasl=1"}).error, "--enable-sasl takes no value");
}

// memcached's TLS options: -Z, and the ssl_ settings among -o's.
TEST(CommandLineTest, TlsOptionsTranslate) {
  EXPECT_EQ(translated({"-Z", "-o", "ssl_chain_cert=/c.pem,ssl_key=/k.pem,ssl_ca_cert=/ca.pem"}),
            (Args{"--tls=true", "--tls_cert_file=/c.pem", "--tls_key_file=/k.pem",
                  "--tls_ca_file=/ca.pem"}));
  EXPECT_EQ(translated({"--enable-ssl", "--extended=ssl_verify_mode=2,ssl_min_version=3"}),
            (Args{"--tls=true", "--tls_verify_client=true", "--tls_min_version=1.3"}));
  EXPECT_EQ(translated({"-o", "ssl_verify_mode=3", "-o", "ssl_verify_mode=0"}),
            (Args{"--tls_verify_client=true", "--tls_verify_client=false"}));
  EXPECT_EQ(translated({"-o", "ssl_ciphers=ECDHE+AESGCM"}), (Args{"--tls_ciphers=ECDHE+AESGCM"}));
  // getopt's joined form, as memcached takes it.
  EXPECT_EQ(translated({"-ossl_verify_mode=3,ssl_key=/k.pem"}),
            (Args{"--tls_verify_client=true", "--tls_key_file=/k.pem"}));
  EXPECT_EQ(translate({"-ossl_verify_mode=1"}).error,
            "-o ssl_verify_mode=1: lockcached takes 0, 2, 3");
  EXPECT_EQ(translate({"-o", "ssl_verify_mode=1"}).error,
            "-o ssl_verify_mode=1: lockcached takes 0, 2, 3");
  EXPECT_EQ(translate({"-o", "ssl_min_version=1"}).error,
            "-o ssl_min_version=1: lockcached takes 2, 3");
  EXPECT_EQ(translate({"-o", "ssl_key"}).error, "-o ssl_key needs a value");
}

TEST(CommandLineTest, BadValuesAreErrors) {
  EXPECT_EQ(translate({"-p"}).error, "-p needs a value");
  EXPECT_EQ(translate({"-p", "abc"}).error, "-p abc: expected a whole number from 0 to 65535");
  EXPECT_EQ(translate({"-p", "70000"}).error, "-p 70000: expected a whole number from 0 to 65535");
  EXPECT_EQ(translate({"-m", "0"}).error, "-m 0: expected a whole number from 1 to 2147483647");
  EXPECT_EQ(translate({"--conn-limit=x"}).error,
            "--conn-limit x: expected a whole number from 1 to 2147483647");
  EXPECT_EQ(translate({"--daemon=1"}).error, "--daemon takes no value");
  EXPECT_EQ(translate({"-u", ""}).error, "-u needs a user name");
}

TEST(CommandLineTest, HelpAndVersionLetters) {
  EXPECT_EQ(translated({"-h"}), (Args{"--help"}));
  EXPECT_EQ(translated({"-V"}), (Args{"--version"}));
}

TEST(CommandLineTest, ParseItemSize) {
  int64_t bytes = 0;
  ASSERT_TRUE(parse_item_size("1k", &bytes));
  EXPECT_EQ(bytes, 1024);
  ASSERT_TRUE(parse_item_size("1024m", &bytes));
  EXPECT_EQ(bytes, int64_t{1} << 30);
  EXPECT_FALSE(parse_item_size("", &bytes));
  EXPECT_FALSE(parse_item_size("-1k", &bytes));
  EXPECT_FALSE(parse_item_size("1.5m", &bytes));
}

}  // namespace
}  // namespace lockcached::config
