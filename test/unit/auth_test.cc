// The user table, the password comparison, one connection's attempts, and
// the text protocol's gate (memcached 1.6.18's replies, checked against
// `memcached -Y`; docs/authentication.md).
#include "lockcached/core/auth.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "lockcached/core/command_core.h"
#include "lockcached/protocol/output_queue.h"
#include "lockcached/protocol/text_protocol.h"
#include "lockcached/store/store.h"

namespace lockcached::core {
namespace {

std::string parse_error(std::string_view text) {
  UserTable table;
  std::string error;
  EXPECT_FALSE(parse_user_table(text, &table, &error));
  return error;
}

TEST(UserTableTest, ParsesLinesCrlfCommentsAndColonsInPasswords) {
  UserTable table;
  std::string error;
  ASSERT_TRUE(parse_user_table("# users\nalice:secret\r\n\n  \nbob:pa:ss\ncarol:x", &table, &error))
      << error;
  ASSERT_EQ(table.size(), 3u);
  EXPECT_EQ(table[0].user, "alice");
  EXPECT_EQ(table[0].password, "secret");  // the CR is not part of it
  EXPECT_EQ(table[1].password, "pa:ss");   // split at the first ':'
  EXPECT_EQ(table[2].user, "carol");       // no newline at the end
}

TEST(UserTableTest, NamesTheLineOfEveryMistake) {
  EXPECT_EQ(parse_error("alice:secret\nbob\n"), "line 2: no ':' between user and password");
  EXPECT_EQ(parse_error(":secret\n"), "line 1: empty user name");
  EXPECT_EQ(parse_error("#\n\nalice:\n"), "line 3: empty password for user alice");
  EXPECT_EQ(parse_error("a:1\nb:2\na:3\n"), "line 3: user a is listed twice");
  EXPECT_EQ(parse_error("alice:my secret\n"),
            "line 1: a space or tab in the user name or password (no protocol could send it)");
  EXPECT_EQ(parse_error("# nobody\n\n"), "no users (one user:password a line)");
}

TEST(ConstantTimeEqualTest, EqualOnlyForTheSameBytes) {
  EXPECT_TRUE(constant_time_equal("secret", "secret"));
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_FALSE(constant_time_equal("secreT", "secret"));
  EXPECT_FALSE(constant_time_equal("Secret", "secret"));
  EXPECT_FALSE(constant_time_equal("secret", "secret2"));  // a prefix
  EXPECT_FALSE(constant_time_equal("secret2", "secret"));  // longer
  EXPECT_FALSE(constant_time_equal("", "x"));
  EXPECT_FALSE(constant_time_equal(std::string_view("a\0", 2), "a"));
  EXPECT_FALSE(constant_time_equal(std::string_view("a\0", 2), std::string_view("a\1", 2)));
}

class AuthenticatorTest : public testing::Test {
 protected:
  void write(const std::string& text) {
    std::ofstream(path_, std::ios::trunc) << text;
  }
  ~AuthenticatorTest() override { std::remove(path_.c_str()); }

  std::string path_ = testing::TempDir() + "auth_test_users." + std::to_string(getpid());
  Authenticator authenticator_;
};

TEST_F(AuthenticatorTest, ChecksEveryUserAndPassword) {
  write("alice:secret\nbob:hunter2\n");
  std::string error;
  ASSERT_TRUE(authenticator_.load(path_, &error)) << error;
  EXPECT_EQ(authenticator_.users(), 2u);
  EXPECT_TRUE(authenticator_.check("alice", "secret"));
  EXPECT_TRUE(authenticator_.check("bob", "hunter2"));
  EXPECT_FALSE(authenticator_.check("alice", "hunter2"));  // another user's password
  EXPECT_FALSE(authenticator_.check("mallory", "secret"));
  EXPECT_FALSE(authenticator_.check("alice", ""));
}

TEST_F(AuthenticatorTest, ABadFileIsReportedWithItsNameAndLine) {
  write("alice:secret\nbroken\n");
  std::string error;
  EXPECT_FALSE(authenticator_.load(path_, &error));
  EXPECT_EQ(error, path_ + ", line 2: no ':' between user and password");
  EXPECT_FALSE(authenticator_.load(path_ + ".missing", &error));
  EXPECT_EQ(error, path_ + ".missing: cannot read it");
}

TEST_F(AuthenticatorTest, ReloadSwapsTheTableOrKeepsTheOldOne) {
  write("alice:old\n");
  std::string error;
  ASSERT_TRUE(authenticator_.load(path_, &error)) << error;
  write("alice:new\n");
  ASSERT_TRUE(authenticator_.reload(&error)) << error;
  EXPECT_TRUE(authenticator_.check("alice", "new"));
  EXPECT_FALSE(authenticator_.check("alice", "old"));
  write("alice\n");  // a mistake while editing: the users stay as they were
  EXPECT_FALSE(authenticator_.reload(&error));
  EXPECT_TRUE(authenticator_.check("alice", "new"));
}

TEST_F(AuthenticatorTest, ASessionLocksOutAfterThreeFailures) {
  write("alice:secret\n");
  std::string error;
  ASSERT_TRUE(authenticator_.load(path_, &error)) << error;
  AuthSession session(&authenticator_);
  EXPECT_TRUE(session.required());
  EXPECT_EQ(session.attempt("alice", "wrong"), AuthResult::kRefused);
  EXPECT_EQ(session.fail(), AuthResult::kRefused);
  EXPECT_EQ(session.attempt("alice", "wrong"), AuthResult::kLockedOut);

  AuthSession other(&authenticator_);
  EXPECT_EQ(other.attempt("alice", "secret"), AuthResult::kAccepted);
  EXPECT_FALSE(other.required());
}

TEST(AuthSessionTest, WithoutAnAuthenticatorNothingIsRequired) {
  AuthSession session;
  EXPECT_FALSE(session.required());
  EXPECT_FALSE(session.enabled());
}

TEST(SaslPlainTest, ParsesAuthzidUserAndPassword) {
  std::string_view user;
  std::string_view password;
  using namespace std::literals;
  ASSERT_TRUE(parse_sasl_plain("\0alice\0secret"sv, &user, &password));
  EXPECT_EQ(user, "alice");
  EXPECT_EQ(password, "secret");
  EXPECT_TRUE(parse_sasl_plain("alice\0alice\0secret"sv, &user, &password));
  EXPECT_FALSE(parse_sasl_plain("bob\0alice\0secret"sv, &user, &password));  // acting for bob
  EXPECT_FALSE(parse_sasl_plain("alice secret"sv, &user, &password));
  EXPECT_FALSE(parse_sasl_plain("\0alice"sv, &user, &password));
  EXPECT_FALSE(parse_sasl_plain("\0\0secret"sv, &user, &password));
  EXPECT_FALSE(parse_sasl_plain("\0alice\0sec\0ret"sv, &user, &password));
}

// The text protocol behind an auth file: a store, a core and a protocol.
class NoStats : public StatsSource {
 public:
  void collect(StatsGroup, StatList&) const override {}
  void reset() override {}
};

class TextAuthTest : public AuthenticatorTest {
 protected:
  TextAuthTest() {
    write("alice:secret\n");
    std::string error;
    EXPECT_TRUE(authenticator_.load(path_, &error)) << error;
  }

  std::string feed(std::string_view bytes) {
    pending_.append(bytes);
    pending_.erase(0, protocol_.consume(pending_, out_));
    return out_.take_all();
  }

  store::ManualClock clock_;
  store::Store store_{{size_t{16} << 20, 4096, 1, 4}, clock_};
  NoStats source_;
  ThreadStats stats_;
  CommandCore core_{store_, stats_, source_, 1, nullptr, nullptr, nullptr, nullptr,
                    &authenticator_};
  protocol::TextProtocol protocol_{core_};
  protocol::OutputQueue out_;
  std::string pending_;
};

TEST_F(TextAuthTest, EverythingButSetIsRefusedBeforeAuthenticating) {
  for (std::string_view request : {"get a\r\n", "version\r\n", "mg a v\r\n", "quit\r\n",
                                   "stats\r\n", "set k 0 0\r\n", "SET k 0 0 1\r\n", "x\r\n"}) {
    EXPECT_EQ(feed(request), "CLIENT_ERROR unauthenticated\r\n") << request;
  }
  EXPECT_FALSE(protocol_.wants_close());  // memcached keeps the connection
  EXPECT_EQ(stats_.auth_cmds.load(), 0u);
}

TEST_F(TextAuthTest, TheSetOfUserAndPasswordAuthenticatesAndStoresNothing) {
  EXPECT_EQ(feed("set k 0 0 5\r\nalice\r\n"), "CLIENT_ERROR bad authentication token format\r\n");
  EXPECT_EQ(feed("set k 0 0 12 noreply\r\nalice secret\r\n"), "STORED\r\n");  // noreply ignored
  EXPECT_EQ(feed("get k\r\n"), "END\r\n");
  EXPECT_EQ(feed("set k 0 0 1\r\nx\r\nget k\r\n"), "STORED\r\nVALUE k 0 1\r\nx\r\nEND\r\n");
  EXPECT_EQ(stats_.auth_cmds.load(), 2u);
  EXPECT_EQ(stats_.auth_errors.load(), 1u);
}

TEST_F(TextAuthTest, ExtraWordsAndSpacesAreIgnoredAsMemcachedDoes) {
  EXPECT_EQ(feed("set k 0 0 13\r\nalice  secret\r\n"), "STORED\r\n");
}

TEST_F(TextAuthTest, TheThirdFailureClosesTheConnection) {
  EXPECT_EQ(feed("set k 0 0 9\r\nalice bad\r\n"), "CLIENT_ERROR authentication failure\r\n");
  EXPECT_EQ(feed("set k 0 0 9\r\nalice bad\r\n"), "CLIENT_ERROR authentication failure\r\n");
  EXPECT_FALSE(protocol_.wants_close());
  EXPECT_EQ(feed("set k 0 0 12\r\nalice secreT\r\n"), "CLIENT_ERROR authentication failure\r\n");
  EXPECT_TRUE(protocol_.wants_close());
}

TEST_F(TextAuthTest, AnOversizedTokenIsSkippedAndRefused) {
  std::string block(protocol::TextProtocol::kMaxAuthData + 1, 'x');
  EXPECT_EQ(feed("set k 0 0 " + std::to_string(block.size()) + "\r\n" + block + "\r\nget a\r\n"),
            "CLIENT_ERROR authentication failure\r\nCLIENT_ERROR unauthenticated\r\n");
  // A block without its CRLF: the rest of the line is a (refused) request.
  EXPECT_EQ(feed("set k 0 0 3\r\nabcde\r\n"),
            "CLIENT_ERROR bad command line termination\r\nCLIENT_ERROR unauthenticated\r\n");
}

}  // namespace
}  // namespace lockcached::core
