// Facts about the machine read at run time (not at build time: kernels/isa.h has the CPU's instruction sets).
#pragma once

#include <cstdint>
#include <string>

namespace pg {

// MemAvailable of /proc/meminfo in bytes (0 when unreadable): what a command may allocate without swapping.
int64_t available_memory_bytes();
// Bytes the calling thread caused to be read from storage so far (`read_bytes` of /proc/thread-self/io: page cache
// misses, readahead included); -1 where the kernel does not offer it.
int64_t thread_read_bytes();

// The block device holding `path` as benchmarks name it: "/dev/vda (virtio_blk, ext4, rotational 1)",
// "/dev/nvme0n1 (Samsung SSD 980, nvme, xfs, rotational 0)", "tmpfs" — from stat(2), /sys/dev/block and
// /proc/self/mounts; the parts it cannot read are left out ("unknown" when none).
std::string describe_disk(const std::string& path);

// Lowers the calling process (and the children it starts later) to `nice` (0..19) so that other work on the machine
// keeps its speed: setpriority, and, where the kernel groups processes by session for scheduling (autogroup:
// /proc/sys/kernel/sched_autogroup_enabled = 1, where nice alone does not yield to processes of other sessions), the
// autogroup's nice too, but only when the process leads its own session (started with `setsid`): an autogroup is
// shared by every process of a session, the user's shell included. Returns what was done, for the log ("nice 19,
// autogroup nice 19", or why a part was not set).
std::string run_in_background(int nice);

}  // namespace pg
