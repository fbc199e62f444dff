// Logging in to a server started with --auth_file (docs/authentication.md):
// who, with what password, and the one way a refused login ends. Each
// protocol client logs in right after connecting, before anything else.
#pragma once

#include <string>
#include <string_view>

#include "failure.h"

namespace lockcached::cli {

// --user and the password from --password-file or $LOCKCACHED_PASSWORD.
struct Login {
  std::string user;
  std::string password;
};

// The server said no to `login`: the user is named, the password never.
[[noreturn]] inline void refuse_login(const Login& login, const std::string& peer,
                                      std::string_view reply) {
  throw Failure(kExitLoginRefused, "server " + peer + " refused the login for " + login.user +
                                       " (\"" + std::string(reply) + "\")");
}

}  // namespace lockcached::cli
