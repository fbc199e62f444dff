#include "lockcached/store/size_classes.h"

#include <bit>

namespace lockcached::store {
namespace {

constexpr size_t kTinySpacing = 16;  // up to 128 bytes
constexpr size_t kTinyLimit = 128;
constexpr unsigned kTinyClasses = 6;  // 48, 64, 80, 96, 112, 128
constexpr unsigned kClassesPerDoubling = 4;

// Above 128 bytes: `bytes` lies in (2^lg, 2^(lg+1)], where the classes are
// 2^lg + k * 2^(lg-2) for k = 1..4.
struct Step {
  unsigned lg;
  size_t k;
};
Step step_of(size_t bytes) {
  unsigned lg = static_cast<unsigned>(std::bit_width(bytes - 1)) - 1;
  size_t spacing = size_t{1} << (lg - 2);
  return {lg, (bytes - (size_t{1} << lg) + spacing - 1) / spacing};
}

}  // namespace

unsigned size_class_of(size_t bytes) {
  if (bytes <= kSmallestClassSize) return 1;
  if (bytes <= kTinyLimit)
    return static_cast<unsigned>((bytes + kTinySpacing - 1) / kTinySpacing) - 2;
  if (bytes > kLargestExactClassSize) return kLargestSizeClass;
  Step step = step_of(bytes);
  return kTinyClasses + (step.lg - 7) * kClassesPerDoubling + static_cast<unsigned>(step.k);
}

size_t size_class_size(unsigned id) {
  if (id <= kTinyClasses) return (id + 2) * kTinySpacing;
  unsigned above = id - kTinyClasses - 1;  // 0 for 160
  unsigned lg = 7 + above / kClassesPerDoubling;
  size_t k = above % kClassesPerDoubling + 1;
  return (size_t{1} << lg) + k * (size_t{1} << (lg - 2));
}

size_t allocation_size(size_t bytes) {
  if (bytes <= kLargestExactClassSize) return size_class_size(size_class_of(bytes));
  Step step = step_of(bytes);
  return (size_t{1} << step.lg) + step.k * (size_t{1} << (step.lg - 2));
}

}  // namespace lockcached::store
