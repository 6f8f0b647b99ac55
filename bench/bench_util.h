// Small helpers shared by the micro-benchmarks in bench/.
#pragma once
#include <cstdlib>
#include <vector>

namespace pg::bench {

// "1,2" -> {1, 2}.
inline std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p;) {
    v.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return v;
}

}  // namespace pg::bench
