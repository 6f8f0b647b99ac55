// Implementation of train/dist.h: Open MPI (or any MPI) when CMake found one (PG_HAVE_MPI), else a single rank.
#include "train/dist.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"

#ifdef PG_HAVE_MPI
#include <mpi.h>
#endif

namespace pg::dist {
namespace {

World g_world;
bool g_init = false;

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return end && *end == '\0' ? x : fallback;
}

// How the launcher started this process: the number of ranks it says there are (1 = a plain process), and
// whether it speaks a protocol MPI_Init can use (Open MPI's mpirun, or PMIx as srun --mpi=pmix provides).
struct Launch {
  long ranks = 1;
  bool mpi_capable = false;
  std::string by;
};
Launch launch_from_env() {
  Launch l;
  if (std::getenv("OMPI_COMM_WORLD_SIZE")) {
    l.ranks = env_long("OMPI_COMM_WORLD_SIZE", 1), l.mpi_capable = true, l.by = "mpirun";
  } else if (std::getenv("PMIX_RANK")) {
    l.ranks = env_long("SLURM_STEP_NUM_TASKS", env_long("PMIX_SIZE", 2)), l.mpi_capable = true,
    l.by = "PMIx (srun --mpi=pmix)";
  } else if (std::getenv("PMI_SIZE") && env_long("PMI_SIZE", 1) > 1) {
    l.ranks = env_long("PMI_SIZE", 1), l.mpi_capable = true, l.by = "PMI";
  } else if (const long step = env_long("SLURM_STEP_ID", -1); step >= 0 && step < 0xFFFFFF00L) {
    // An srun step (not the batch or extern step, whose ids are 0xFFFFFFFx) without PMIx: independent tasks.
    l.ranks = env_long("SLURM_STEP_NUM_TASKS", 1), l.by = "srun without an MPI plugin";
  }
  return l;
}

#ifdef PG_HAVE_MPI
class MpiLink final : public PeerLink {
 public:
  int rank() const override { return g_world.rank; }
  int size() const override { return g_world.size; }
  void sendrecv(int partner, std::span<const std::byte> send, std::span<std::byte> recv) override {
    // MPI counts are int: large buffers go in 1 GiB pieces (both sides split the same way).
    constexpr size_t kPiece = size_t{1} << 30;
    size_t so = 0, ro = 0;
    do {
      const size_t sn = std::min(kPiece, send.size() - so), rn = std::min(kPiece, recv.size() - ro);
      const int rc = MPI_Sendrecv(send.data() + so, static_cast<int>(sn), MPI_BYTE, partner, 17, recv.data() + ro,
                                  static_cast<int>(rn), MPI_BYTE, partner, 17, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      PG_CHECK(rc == MPI_SUCCESS, "MPI_Sendrecv with rank ", partner, " failed (", rc, ")");
      so += sn, ro += rn;
    } while (so < send.size() || ro < recv.size());
  }
};
MpiLink g_link;
#endif

}  // namespace

bool built_with_mpi() {
#ifdef PG_HAVE_MPI
  return true;
#else
  return false;
#endif
}

std::string mpi_description() {
#ifdef PG_HAVE_MPI
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int n = 0;
  MPI_Get_library_version(buf, &n);
  std::string s(buf, static_cast<size_t>(std::max(0, n)));
  if (const size_t comma = s.find(','); comma != std::string::npos) s.resize(comma);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (const size_t v = s.find(" v");
      v != std::string::npos && v + 2 < s.size() && std::isdigit(static_cast<unsigned char>(s[v + 2])))
    s.erase(v + 1, 1);  // "Open MPI v4.1.4" -> "Open MPI 4.1.4"
  return s.empty() ? std::string("MPI (unknown library)") : s;
#else
  return "not built";
#endif
}

const World& init(int* argc, char*** argv) {
  if (g_init) return g_world;
  g_init = true;
  const Launch l = launch_from_env();
  if (l.ranks > 1 && !l.mpi_capable)
    throw UserError(str("launched as ", l.ranks, " tasks by ", l.by,
                        ": each would train alone (hint: srun --mpi=pmix, ", "or mpirun inside the allocation)"));
#ifdef PG_HAVE_MPI
  if (l.mpi_capable) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    g_world.mpi = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_world.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world.size);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_world.rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &g_world.local_rank);
    MPI_Comm_size(local, &g_world.local_size);
    MPI_Comm_free(&local);
  }
#else
  (void)argc, (void)argv;
  if (l.ranks > 1)
    throw UserError(
        str("launched as rank ", env_long("OMPI_COMM_WORLD_RANK", env_long("PMIX_RANK", 0)), " of ", l.ranks, " by ",
            l.by, ", but this pagegram was built without MPI (`pagegram --version` says mpi: not ",
            "built) (hint: apt-get install libopenmpi-dev openmpi-bin, then rebuild with scripts/setup.sh)"));
#endif
  return g_world;
}

const World& world() { return g_world; }

void finalize() {
#ifdef PG_HAVE_MPI
  if (g_world.mpi) {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
  }
#endif
}

void abort_all(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
#ifdef PG_HAVE_MPI
  if (g_world.mpi) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::_Exit(code);
}

std::string pin_to_local_share() {
#ifdef PG_HAVE_MPI
  if (!g_world.mpi || g_world.size == 1) return "";
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof(mine), &mine) != 0) return "";
  // Every local rank's mask: split only when the launcher left them all the same set.
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_world.rank, MPI_INFO_NULL, &local);
  std::vector<cpu_set_t> all(static_cast<size_t>(g_world.local_size));
  MPI_Allgather(&mine, sizeof(mine), MPI_BYTE, all.data(), sizeof(mine), MPI_BYTE, local);
  MPI_Comm_free(&local);
  for (const cpu_set_t& s : all)
    if (!CPU_EQUAL(&s, &mine)) return "";  // bound by the launcher: keep its binding
  std::vector<int> cpus;
  for (int i = 0; i < CPU_SETSIZE; ++i)
    if (CPU_ISSET(i, &mine)) cpus.push_back(i);
  if (cpus.empty()) return "";
  const int n = static_cast<int>(cpus.size()), L = g_world.local_size, i = g_world.local_rank;
  cpu_set_t share;
  CPU_ZERO(&share);
  std::string desc;
  if (n >= L) {
    const int k = n / L;
    for (int j = i * k; j < (i + 1) * k; ++j)
      CPU_SET(cpus[static_cast<size_t>(j)], &share),
          desc += (desc.empty() ? "" : ",") + std::to_string(cpus[static_cast<size_t>(j)]);
  } else {
    CPU_SET(cpus[static_cast<size_t>(i % n)], &share);
    desc = std::to_string(cpus[static_cast<size_t>(i % n)]);
  }
  if (sched_setaffinity(0, sizeof(share), &share) != 0) return "";
  return str("cpus ", desc, " of ", n, " (local rank ", i, " of ", L, ")");
#else
  return "";
#endif
}

PeerLink* world_link() {
#ifdef PG_HAVE_MPI
  if (g_world.mpi && g_world.size > 1) return &g_link;
#endif
  return nullptr;
}

}  // namespace pg::dist
