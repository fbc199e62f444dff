// A latency histogram with log-linear buckets (as HdrHistogram): 32 linear
// sub-buckets per power of two, so any recorded value is known to within
// about 3%, in a fixed 16 KiB array that recording never resizes.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

namespace loadgen {

class Histogram {
 public:
  void record(uint64_t value) {
    ++counts_[index_of(value)];
    ++count_;
    sum_ += value;
    max_ = std::max(max_, value);
  }

  void merge(const Histogram& other) {
    for (size_t i = 0; i < kBuckets; ++i)
      counts_[i] += other.counts_[i];
    count_ += other.count_;
    sum_ += other.sum_;
    max_ = std::max(max_, other.max_);
  }

  uint64_t count() const { return count_; }
  uint64_t max() const { return max_; }
  double mean() const { return count_ == 0 ? 0.0 : static_cast<double>(sum_) / count_; }

  // The value below which `fraction` of the recorded values lie: the middle
  // of the bucket that holds that rank (never above the largest value seen).
  uint64_t percentile(double fraction) const {
    if (count_ == 0) return 0;
    const auto rank = static_cast<uint64_t>(fraction * static_cast<double>(count_ - 1)) + 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < kBuckets; ++i) {
      seen += counts_[i];
      if (seen >= rank) return std::min(max_, (lowest(i) + lowest(i + 1)) / 2);
    }
    return max_;
  }

 private:
  static constexpr int kSubBits = 5;
  static constexpr uint64_t kSub = uint64_t{1} << kSubBits;
  static constexpr size_t kBuckets = 64 * kSub;

  static size_t index_of(uint64_t value) {
    if (value < 2 * kSub) return static_cast<size_t>(value);
    const int shift = std::bit_width(value) - 1 - kSubBits;
    return static_cast<size_t>(shift) * kSub + static_cast<size_t>(value >> shift);
  }

  static uint64_t lowest(size_t index) {
    if (index < 2 * kSub) return index;
    const size_t shift = index / kSub - 1;
    return static_cast<uint64_t>(index - shift * kSub) << shift;
  }

  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0;
  uint64_t sum_ = 0;
  uint64_t max_ = 0;
};

}  // namespace loadgen
