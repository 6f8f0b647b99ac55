// Facts about the machine read at run time (not at build time: core/isa.h has the CPU's instruction sets).
#pragma once

#include <cstdint>
#include <string>

namespace pg {

// MemAvailable of /proc/meminfo in bytes (0 when unreadable): what a command may allocate without swapping.
int64_t available_memory_bytes();

// The block device holding `path` as benchmarks name it: "/dev/vda (virtio_blk, ext4, rotational 1)",
// "/dev/nvme0n1 (Samsung SSD 980, nvme, xfs, rotational 0)", "tmpfs" — from stat(2), /sys/dev/block and
// /proc/self/mounts; the parts it cannot read are left out ("unknown" when none).
std::string describe_disk(const std::string& path);

}  // namespace pg
