// Releases two threads together, for the stress tests of races between
// threads: each calls spin_barrier, and neither goes on before both came.
// It spins, so that both go on at the same moment when both are running,
// and yields once it has spun a while, so that on a busy machine (CI's two
// cores, another test beside) the thread it waits for gets a core.
#pragma once

#include <atomic>
#include <thread>

namespace lockcached::testing {

inline void spin_barrier(std::atomic<int>& ready) {
  ready.fetch_add(1);
  for (int spins = 0; ready.load() < 2; ++spins) {
    if (spins > 10000) std::this_thread::yield();
  }
}

}  // namespace lockcached::testing
