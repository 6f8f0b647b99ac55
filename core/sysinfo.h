// Facts about the machine read at run time (not at build time: core/isa.h has the CPU's instruction sets).
#pragma once

#include <cstdint>

namespace pg {

// MemAvailable of /proc/meminfo in bytes (0 when unreadable): what a command may allocate without swapping.
int64_t available_memory_bytes();

}  // namespace pg
