#include <chrono>

#include "lockcached/timing/scheduler.h"

namespace lockcached::timing {
namespace {

class SteadyClock final : public Clock {
 public:
  int64_t now_ms() const override {
    using namespace std::chrono;
    return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
  }
};

}  // namespace

const Clock& steady_clock() {
  static const SteadyClock clock;
  return clock;
}

}  // namespace lockcached::timing
