// Authentication against memcached's -Y file (docs/authentication.md): the
// user table, the one place passwords are compared, and the state one
// connection keeps. Every protocol (text, meta, binary SASL PLAIN, the lock
// service's `auth`) asks an AuthSession; none compares a password itself.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lockcached/constant_time.h"

namespace lockcached::core {

// memcached's -Y format, one `user:password` a line.
struct UserEntry {
  std::string user;
  std::string password;
};
using UserTable = std::vector<UserEntry>;

// Parses the file's text. Splits at the first ':' (a password may hold
// one); drops a line's trailing CR; skips blank lines (spaces and tabs
// only) and lines starting
// with '#'. False, with "line N: why" in *error, for a line without ':',
// an empty user or password, a space or tab in either (neither the text
// protocol nor the lock service could send it), a user listed twice, or a
// file without users.
bool parse_user_table(std::string_view text, UserTable* table, std::string* error);

// The user table of one file, shared by every thread. A check reads an
// immutable snapshot; reload() swaps in a new one, or keeps the old one
// when the file is bad.
class Authenticator {
 public:
  // Reads `path`; false with "PATH, line N: why" (or "PATH: why") in *error.
  bool load(const std::string& path, std::string* error);
  // Puts `table` in place of the current users (load, tests, fuzzers).
  void replace(UserTable table);
  // Reads the same file again (SIGHUP).
  bool reload(std::string* error) { return load(path_, error); }
  // Compares against every entry, so the time does not tell whether the
  // user exists nor which entry matched.
  bool check(std::string_view user, std::string_view password) const;
  size_t users() const { return snapshot()->size(); }

 private:
  std::shared_ptr<const UserTable> snapshot() const;

  std::string path_;
  mutable std::mutex mutex_;
  std::shared_ptr<const UserTable> table_ = std::make_shared<const UserTable>();
};

// What one attempt did.
enum class AuthResult : uint8_t {
  kAccepted,
  kRefused,      // wrong user or password: the client may try again
  kLockedOut,    // refused for the kMaxFailures-th time: close the connection
};

// One connection's state. Without an authenticator it is authenticated from
// the start, so a server without --auth_file pays one predictable branch.
class AuthSession {
 public:
  static constexpr int kMaxFailures = 3;

  explicit AuthSession(const Authenticator* authenticator = nullptr)
      : authenticator_(authenticator), required_(authenticator != nullptr) {}

  // True until a successful attempt, when the server wants authentication.
  bool required() const { return required_; }
  // True when the server has an auth file at all (SASL opcodes exist).
  bool enabled() const { return authenticator_ != nullptr; }
  AuthResult attempt(std::string_view user, std::string_view password);
  // A malformed attempt (no space in the text protocol's token, a bad SASL
  // PLAIN message) counts as a failure too.
  AuthResult fail();

 private:
  const Authenticator* const authenticator_;
  bool required_;
  int failures_ = 0;
};

// SASL PLAIN's message (RFC 4616): authzid NUL authcid NUL password. False
// when it is not that shape, or names an authzid other than the user (we
// have no notion of acting for someone else).
bool parse_sasl_plain(std::string_view message, std::string_view* user,
                      std::string_view* password);

}  // namespace lockcached::core
