#include "core/sysinfo.h"

#include <fstream>
#include <string>

namespace pg {

int64_t available_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("MemAvailable:", 0) == 0) return std::stoll(line.substr(13)) * 1024;
  return 0;
}

}  // namespace pg
