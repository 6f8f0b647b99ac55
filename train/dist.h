// The ranks of a data-parallel run (docs/mpi.md). MPI is initialized only when a
// launcher started this process as one of several ranks (mpirun / srun --mpi=pmix: their environment says so);
// a plain process is rank 0 of 1 and never touches MPI, also in a binary built with it. Without MPI at build
// time (CMake found none) a launch as several ranks is refused with one line.
#pragma once
#include <memory>
#include <string>

#include "train/grad_tree.h"

namespace pg::dist {

struct World {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;  // among the ranks on this node
  bool mpi = false;  // MPI initialized (size may still be 1: mpirun -np 1)
};

// "Open MPI 4.1.4" (the library this binary was built with), or "not built".
std::string mpi_description();
bool built_with_mpi();

// Reads the launcher's environment; initializes MPI when launched as ranks (UserError without MPI support).
// Call once, first thing in main(); later calls return the same world.
const World& init(int* argc, char*** argv);
const World& world();
// MPI_Finalize when initialized (at a normal exit).
void finalize();
// Ends every rank with exit code `code` (MPI_Abort), or exits this process when MPI is not initialized.
[[noreturn]] void abort_all(int code);

// Narrows this process's CPU affinity to its share of the node's cores before any thread starts: when the
// launcher left every local rank the same CPU set, local rank i gets the i-th of local_size equal blocks (one
// CPU each, round robin, when there are more ranks than CPUs); a launcher's own binding is kept. Returns a
// description ("cpus 2,3 of 0-3") or "" when nothing was changed. No-op for a single rank.
std::string pin_to_local_share();

// The world's PeerLink (nullptr for a single rank).
PeerLink* world_link();

}  // namespace pg::dist
