#include "lockcached/core/auth.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace lockcached::core {
namespace {

// Why a `user:password` line is unusable; empty when it is fine.
std::string line_problem(std::string_view line, const UserTable& table) {
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return "no ':' between user and password";
  std::string_view user = line.substr(0, colon);
  std::string_view password = line.substr(colon + 1);
  if (user.empty()) return "empty user name";
  if (password.empty()) return "empty password for user " + std::string(user);
  if (line.find_first_of(" \t") != std::string_view::npos) {
    return "a space or tab in the user name or password (no protocol could send it)";
  }
  for (const UserEntry& entry : table) {
    if (entry.user == user) return "user " + std::string(user) + " is listed twice";
  }
  return {};
}

}  // namespace

bool parse_user_table(std::string_view text, UserTable* table, std::string* error) {
  table->clear();
  size_t number = 0;
  while (!text.empty()) {
    ++number;
    size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    bool blank = line.find_first_not_of(" \t") == std::string_view::npos;
    if (blank || line.front() == '#') continue;
    if (std::string problem = line_problem(line, *table); !problem.empty()) {
      *error = "line " + std::to_string(number) + ": " + problem;
      return false;
    }
    size_t colon = line.find(':');
    table->push_back({std::string(line.substr(0, colon)), std::string(line.substr(colon + 1))});
  }
  if (table->empty()) {
    *error = "no users (one user:password a line)";
    return false;
  }
  return true;
}

bool Authenticator::load(const std::string& path, std::string* error) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    *error = path + ": cannot read it";
    return false;
  }
  // istream::read, not an istreambuf_iterator: libstdc++'s file buffer
  // throws on a read error (a directory: EISDIR), which read() turns into
  // badbit.
  std::string text;
  char chunk[4096];
  while (file.read(chunk, sizeof chunk) || file.gcount() > 0)
    text.append(chunk, static_cast<size_t>(file.gcount()));
  if (file.bad()) {
    *error = path + ": cannot read it: " + std::strerror(errno);
    return false;
  }
  UserTable table;
  if (!parse_user_table(text, &table, error)) {
    *error = path + (error->starts_with("line ") ? ", " : ": ") + *error;
    return false;
  }
  path_ = path;  // only main's thread loads; the checks read the table alone
  replace(std::move(table));
  return true;
}

void Authenticator::replace(UserTable table) {
  auto snapshot = std::make_shared<const UserTable>(std::move(table));
  std::lock_guard lock(mutex_);
  table_ = std::move(snapshot);
}

std::shared_ptr<const UserTable> Authenticator::snapshot() const {
  std::lock_guard lock(mutex_);
  return table_;
}

bool Authenticator::check(std::string_view user, std::string_view password) const {
  std::shared_ptr<const UserTable> table = snapshot();
  bool matched = false;
  for (const UserEntry& entry : *table) {
    // Both compared every time, and no `&&`: no short cut.
    bool same_user = constant_time_equal(user, entry.user);
    bool same_password = constant_time_equal(password, entry.password);
    matched = matched | (static_cast<unsigned>(same_user) & static_cast<unsigned>(same_password));
  }
  return matched;
}

AuthResult AuthSession::attempt(std::string_view user, std::string_view password) {
  if (authenticator_ == nullptr || !authenticator_->check(user, password)) return fail();
  required_ = false;
  failures_ = 0;
  return AuthResult::kAccepted;
}

AuthResult AuthSession::fail() {
  return ++failures_ >= kMaxFailures ? AuthResult::kLockedOut : AuthResult::kRefused;
}

bool parse_sasl_plain(std::string_view message, std::string_view* user,
                      std::string_view* password) {
  size_t first = message.find('\0');
  if (first == std::string_view::npos) return false;
  size_t second = message.find('\0', first + 1);
  if (second == std::string_view::npos) return false;
  std::string_view authzid = message.substr(0, first);
  *user = message.substr(first + 1, second - first - 1);
  *password = message.substr(second + 1);
  if (password->find('\0') != std::string_view::npos || user->empty()) return false;
  return authzid.empty() || authzid == *user;
}

}  // namespace lockcached::core
