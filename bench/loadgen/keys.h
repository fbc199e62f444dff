// Which key a request uses: a fast per-thread random generator, uniform or
// Zipf-distributed key numbers, and fixed-width key names ("key:000042"), so
// that every request of a run has the same length whatever its key.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

namespace loadgen {

// splitmix64: tiny state, good enough for picking keys, no locking.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  uint64_t below(uint64_t bound) { return next() % bound; }

 private:
  uint64_t state_;
};

// Key numbers in [0, n): uniform, or Zipf with exponent theta (key 0 the
// hottest) by Gray et al.'s constant-time method ("Quickly generating
// billion-record synthetic databases", as in YCSB).
class KeyChooser {
 public:
  KeyChooser(uint64_t n, bool zipf, double theta) : n_(n), zipf_(zipf), theta_(theta) {
    if (!zipf_) return;
    double zetan = 0;
    for (uint64_t i = 1; i <= n_; ++i)
      zetan += 1.0 / std::pow(static_cast<double>(i), theta_);
    const double zeta2 = 1.0 + 1.0 / std::pow(2.0, theta_);
    zetan_ = zetan;
    alpha_ = 1.0 / (1.0 - theta_);
    eta_ = (1.0 - std::pow(2.0 / static_cast<double>(n_), 1.0 - theta_)) / (1.0 - zeta2 / zetan);
    half_pow_theta_ = 1.0 + std::pow(0.5, theta_);
  }

  uint64_t next(Rng& rng) const {
    if (!zipf_) return rng.below(n_);
    const double u = rng.unit();
    const double uz = u * zetan_;
    if (uz < 1.0) return 0;
    if (uz < half_pow_theta_) return n_ > 1 ? 1 : 0;
    const auto key =
        static_cast<uint64_t>(static_cast<double>(n_) * std::pow(eta_ * u - eta_ + 1.0, alpha_));
    return key < n_ ? key : n_ - 1;
  }

 private:
  uint64_t n_;
  bool zipf_;
  double theta_;
  double zetan_ = 0;
  double alpha_ = 0;
  double eta_ = 0;
  double half_pow_theta_ = 0;
};

// Key names: a prefix and the key number in fixed-width decimal.
class KeyFormat {
 public:
  KeyFormat(std::string prefix, uint64_t key_count) : prefix_(std::move(prefix)) {
    for (uint64_t n = key_count > 1 ? key_count - 1 : 1; n > 0; n /= 10)
      ++digits_;
  }
  size_t size() const { return prefix_.size() + digits_; }
  // Writes the name of key `number` (size() bytes) at `out`.
  void write(uint64_t number, char* out) const {
    prefix_.copy(out, prefix_.size());
    for (size_t i = size(); i > prefix_.size(); --i) {
      out[i - 1] = static_cast<char>('0' + number % 10);
      number /= 10;
    }
  }
  // True when `name` is the name of key `number`.
  bool is(std::string_view name, uint64_t number) const {
    if (name.size() != size()) return false;
    char expected[300];
    write(number, expected);
    return name == std::string_view(expected, size());
  }

 private:
  std::string prefix_;
  size_t digits_ = 0;
};

}  // namespace loadgen
