// Thread set-up: OpenMP thread count, pinned to distinct cores by default (PERFORMANCE.md: unpinned
// 2-thread runs are bimodal), and a record of what was set for logs.
#pragma once
#include <string>
#include <vector>

namespace pg {

struct ThreadInfo {
  int threads = 1;
  bool pinned = false;
  std::string cpus;  // e.g. "0,1"
};

// The CPUs this process may use (its affinity mask), read once at the first call: pinning narrows the calling
// thread's own mask, so later reads would see a single CPU.
const std::vector<int>& allowed_cpus();
// Sets the OpenMP thread count (0 = all allowed CPUs) and pins thread i to the i-th allowed CPU unless
// pin is false or PAGEGRAM_NO_PIN is set. Call once before parallel work; returns what was done.
ThreadInfo setup_threads(int requested, bool pin = true);
// The number of OpenMP threads currently configured.
int thread_count();
// On a thread started after setup_threads (a server's engine thread): the same set-up for this thread's own OpenMP
// team (the thread count is a per-thread setting, and the new thread inherited the pinned caller's single CPU, so
// its team would otherwise crowd onto one core). Nothing when setup_threads was never called.
void adopt_thread_setup();

}  // namespace pg
