// Comparing secrets (passwords, session ids) without telling an attacker,
// through the time a comparison takes, how much of a guess was right.
#pragma once

#include <cstddef>
#include <string_view>

namespace lockcached {

// Equality whose time depends only on the length of `expected` (the
// secret), never on where the first differing byte is, nor on whether the
// lengths differ: a shorter `given` is read as zeros. The volatile keeps
// the compiler from turning the loop back into an early exit.
inline bool constant_time_equal(std::string_view given, std::string_view expected) {
  volatile unsigned char difference = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    unsigned char byte = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    difference = difference | (byte ^ static_cast<unsigned char>(expected[i]));
  }
  return difference == 0;
}

}  // namespace lockcached
