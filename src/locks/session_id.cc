#include "lockcached/locks/session_id.h"

#include <glog/logging.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>

namespace lockcached::locks {
namespace {

constexpr std::string_view kBase36 = "0123456789abcdefghijklmnopqrstuvwxyz";
constexpr std::string_view kHex = kBase36.substr(0, 16);
// Digits of the largest uint64_t in base36: no serial is longer.
constexpr size_t kMaxSerialDigits = 13;

// Blocks until the kernel's pool is seeded (only ever early at boot). A
// signal or a short read just means asking again.
void fill_random(unsigned char* out, size_t size) {
  while (size > 0) {
    ssize_t got = getrandom(out, size, 0);
    if (got < 0 && errno == EINTR) continue;
    PCHECK(got > 0) << "getrandom: no secure random bytes for a lock-service session id";
    out += got;
    size -= static_cast<size_t>(got);
  }
}

bool all_of(std::string_view text, std::string_view digits) {
  return std::all_of(text.begin(), text.end(),
                     [digits](char c) { return digits.find(c) != std::string_view::npos; });
}

}  // namespace

std::string make_session_secret() {
  unsigned char bytes[kSessionSecretBytes];
  fill_random(bytes, sizeof bytes);
  std::string secret;
  secret.reserve(kSessionSecretDigits);
  for (unsigned char byte : bytes) {
    secret.push_back(kHex[byte >> 4]);
    secret.push_back(kHex[byte & 0xf]);
  }
  return secret;
}

std::string session_serial(uint64_t serial) {
  std::string digits;
  do {
    digits.push_back(kBase36[serial % 36]);
    serial /= 36;
  } while (serial != 0);
  std::reverse(digits.begin(), digits.end());
  return digits;
}

std::optional<SessionIdParts> split_session_id(std::string_view id) {
  size_t dash = id.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  SessionIdParts parts{id.substr(0, dash), id.substr(dash + 1)};
  if (parts.serial.empty() || parts.serial.size() > kMaxSerialDigits ||
      !all_of(parts.serial, kBase36) || parts.secret.size() != kSessionSecretDigits ||
      !all_of(parts.secret, kHex)) {
    return std::nullopt;
  }
  return parts;
}

std::string_view public_session_id(std::string_view id) {
  return id.substr(0, id.find('-'));
}

}  // namespace lockcached::locks
