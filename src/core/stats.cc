#include "lockcached/core/stats.h"

namespace lockcached::core {

void ThreadStats::add_to(CounterValues& sum) const {
#define LOCKCACHED_ADD(name) sum.name += name.load();
  LOCKCACHED_THREAD_COUNTERS(LOCKCACHED_ADD)
#undef LOCKCACHED_ADD
}

void subtract(CounterValues& from, const CounterValues& baseline) {
#define LOCKCACHED_SUB(name) from.name -= baseline.name;
  LOCKCACHED_THREAD_COUNTERS(LOCKCACHED_SUB)
#undef LOCKCACHED_SUB
}

}  // namespace lockcached::core
