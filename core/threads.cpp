// Implementation of core/threads.h (sched_getaffinity / pthread_setaffinity_np inside a parallel region).
#include "core/threads.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <cstdlib>
#include <vector>

namespace pg {

const std::vector<int>& allowed_cpus() {
  static const std::vector<int> cpus = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> c;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
      for (int i = 0; i < CPU_SETSIZE; ++i)
        if (CPU_ISSET(i, &set)) c.push_back(i);
    if (c.empty()) c.push_back(0);
    return c;
  }();
  return cpus;
}

namespace {
struct LastSetup {
  bool done = false;
  int requested = 0;
  bool pin = true;
};
LastSetup& last_setup() {
  static LastSetup s;
  return s;
}
}  // namespace

void adopt_thread_setup() {
  const LastSetup s = last_setup();
  if (s.done) setup_threads(s.requested, s.pin);
}

ThreadInfo setup_threads(int requested, bool pin) {
  last_setup() = {true, requested, pin};
  const std::vector<int>& cpus = allowed_cpus();
  int n = requested > 0 ? requested : static_cast<int>(cpus.size());
  omp_set_dynamic(0);
  omp_set_num_threads(n);
  ThreadInfo info;
  info.threads = n;
  info.pinned = pin && std::getenv("PAGEGRAM_NO_PIN") == nullptr && n <= static_cast<int>(cpus.size());
  if (info.pinned) {
#pragma omp parallel num_threads(n)
    {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpus[omp_get_thread_num()], &one);
      pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
    }
  }
  for (int i = 0; i < n && i < static_cast<int>(cpus.size()); ++i)
    info.cpus += (i ? "," : "") + std::to_string(cpus[i]);
  return info;
}

int thread_count() { return omp_get_max_threads(); }

}  // namespace pg
