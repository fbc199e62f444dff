// Lock-service session ids (docs/lock-service.md, "Session ids"). An id is
// "<serial>-<secret>": the serial, in lowercase base36, is unique among the
// service's sessions and public (`stats locks`, `watch`, logs show it); the
// secret is 128 bits from the kernel's CSPRNG as 32 lowercase hex digits,
// and is what makes the id worth something: `conn_id ID` takes a session
// over with it. A client that could guess a secret could steal another's
// locks during its grace period, so the secret is never drawn from a
// weaker generator, never shown to others, and compared in constant time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "lockcached/constant_time.h"

namespace lockcached::locks {

constexpr size_t kSessionSecretBytes = 16;
constexpr size_t kSessionSecretDigits = 2 * kSessionSecretBytes;

// 32 lowercase hex digits from getrandom(2). A failing getrandom is fatal:
// without the secret, an id could be taken over by anyone.
std::string make_session_secret();

// `serial` in lowercase base36: an id's public part.
std::string session_serial(uint64_t serial);

struct SessionIdParts {
  std::string_view serial;
  std::string_view secret;
};
// The parts of an id of the shape above; nullopt for anything else.
std::optional<SessionIdParts> split_session_id(std::string_view id);

// What others may see of an id: everything before the first '-' (all of it
// if there is none; such an id cannot be resumed here).
std::string_view public_session_id(std::string_view id);

}  // namespace lockcached::locks
