// The flags whose text is parsed once per start (config/parsed_flags.h):
// their values, the problems that stop a start, and the checks that
// report those in the table's order and judge the rest from the parse.
#include "lockcached/config/parsed_flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lockcached/config/checks.h"
#include "lockcached/config/flags.h"

namespace lockcached::config {
namespace {

class ParsedFlagsTest : public testing::Test {
 protected:
  gflags::FlagSaver saver_;  // the flags as they were, after each test
};

TEST_F(ParsedFlagsTest, TheDefaultsParseAndPassTheChecks) {
  ParsedFlags parsed = parse_flags();
  EXPECT_TRUE(parsed.problems.empty());
  EXPECT_EQ(parsed.listen,
            (std::vector<server::ListenAddress>{
                {"0.0.0.0", server::ListenAddress::kDefaultPort, false, "0.0.0.0"}}));
  EXPECT_TRUE(parsed.cluster.empty());
  EXPECT_EQ(parsed.unix_socket_mask, 0700u);
  EXPECT_EQ(parsed.tls.min_version, tls::kTls12);
  FlagProblem problem = check_flags(parsed);
  EXPECT_EQ(problem.flag, "") << problem.message;
}

TEST_F(ParsedFlagsTest, EachFlagParsed) {
  FLAGS_listen = "notls:127.0.0.1:11311,*";
  FLAGS_cluster = "1@127.0.0.1:21501,2@127.0.0.1:21502";
  FLAGS_unix_socket_mask = "0755";
  FLAGS_tls_min_version = "1.3";
  FLAGS_tls_cert_file = "/etc/lockcached/cert.pem";
  ParsedFlags parsed = parse_flags();
  EXPECT_TRUE(parsed.problems.empty());
  ASSERT_EQ(parsed.listen.size(), 3u);
  EXPECT_EQ(parsed.listen[0],
            (server::ListenAddress{"127.0.0.1", 11311, true, "notls:127.0.0.1:11311"}));
  EXPECT_EQ(parsed.listen[2].host, "::");
  EXPECT_EQ(parsed.cluster,
            (std::vector<consensus::Member>{{1, "127.0.0.1:21501"}, {2, "127.0.0.1:21502"}}));
  EXPECT_EQ(parsed.unix_socket_mask, 0755u);
  EXPECT_EQ(parsed.tls.min_version, tls::kTls13);
  EXPECT_EQ(parsed.tls.cert_file, "/etc/lockcached/cert.pem");
}

TEST_F(ParsedFlagsTest, ATextThatDoesNotParseIsItsFlagsProblem) {
  FLAGS_listen = "127.0.0.1:99999";
  FLAGS_cluster = "1@db.example:1";
  FLAGS_unix_socket_mask = "0800";
  ParsedFlags parsed = parse_flags();
  EXPECT_EQ(parsed.problem_of("listen"),
            "127.0.0.1:99999: the port must be a number from 0 to 65535");
  EXPECT_EQ(parsed.problem_of("cluster"), "'1@db.example:1' is not ID@IPV4:PORT (ID 1 or more)");
  EXPECT_EQ(parsed.problem_of("unix_socket_mask"), "must be octal permission bits, 0 to 0777");
  EXPECT_EQ(parsed.problem_of("port"), "");
  EXPECT_TRUE(parsed.listen.empty());
  EXPECT_TRUE(parsed.cluster.empty());
}

// A parse problem comes where the flag's row is, among the table's own
// checks: --port's row is before --listen's.
TEST_F(ParsedFlagsTest, ProblemsInTheTablesOrder) {
  FLAGS_listen = "";
  FLAGS_unix_socket_mask = "9";
  FlagProblem problem = check_flags(parse_flags());
  EXPECT_EQ(problem.flag, "listen");
  EXPECT_EQ(problem.message, "needs at least one address");
  FLAGS_port = 70000;
  problem = check_flags(parse_flags());
  EXPECT_EQ(problem.flag, "port");
  EXPECT_EQ(problem.message, "must be 0..65535");
}

// The rules between flags read the parse they are given.
TEST_F(ParsedFlagsTest, TheRulesJudgeTheParsedListen) {
  FLAGS_listen = "notls:127.0.0.1";
  ParsedFlags parsed = parse_flags();
  EXPECT_EQ(check_flags(parsed).message,
            "notls: needs --tls (memcached's -Z); without it no port speaks TLS");
  FLAGS_virtual_ip = "192.0.2.100";
  parsed.listen = {{"127.0.0.1", server::ListenAddress::kDefaultPort, false, "127.0.0.1"}};
  EXPECT_EQ(check_flags(parsed).flag, "virtual_ip");
  parsed.listen[0].host = "0.0.0.0";
  EXPECT_EQ(check_flags(parsed).flag, "");
}

TEST_F(ParsedFlagsTest, OctalMasks) {
  EXPECT_EQ(parse_octal_mask("0"), 0u);
  EXPECT_EQ(parse_octal_mask("777"), 0777u);
  EXPECT_EQ(parse_octal_mask("0640"), 0640u);
  EXPECT_EQ(parse_octal_mask(""), std::nullopt);
  EXPECT_EQ(parse_octal_mask("8"), std::nullopt);
  EXPECT_EQ(parse_octal_mask("1000"), std::nullopt);
  EXPECT_EQ(parse_octal_mask("07x"), std::nullopt);
}

}  // namespace
}  // namespace lockcached::config
