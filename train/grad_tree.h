// The fixed summation tree of a training step's gradients (docs/mpi.md): micro-batches
// and ranks are combined in one binary tree, so 1 process and R ranks give the same bits.
//
// Each micro-batch's gradient is computed into zeroed buffers (dense: the backbone's and the memory's dense
// gradients; sparse: the table's (row, gradient) list; and its loss), then combined as
//
//   sum(lo, n) = sum(lo, n - n/2) + sum(lo + n - n/2, n/2)        (left + right, one float addition per element)
//
// over the step's micro-batches 0..accum-1. With R ranks (a power of two dividing accum), rank r computes the
// subtree of its contiguous block of accum/R micro-batches (a node log2(R) levels below the root, since every
// level above it splits an even count into equal halves), and the ranks complete the top log2(R) levels with
// pairwise exchanges: at level k rank r and r ^ 2^k add the lower group's sum and the higher group's, the same
// additions as the single process makes. Dense vectors use recursive halving (each rank ends with 1/R of the
// sum) then recursive doubling (everyone gets all of it): 2 (R-1)/R of the vector sent per rank. Sparse lists
// and the loss use recursive doubling of the whole list (log2 R exchanges, lists grow to the union of rows).
// MPI's own reductions (MPI_SUM) are never used: their order is unspecified.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "memory/sparse_grad.h"

namespace pg {

// Depth of the tree over n leaves (0 for one leaf): the number of saved left halves it needs at once.
int tree_depth(int64_t n);

// Visits the leaves lo..lo+n-1 in order and combines them in the fixed tree. `leaf(i)` computes leaf i into the
// caller's "current" buffers; `save(d)` moves current into saved slot d (current may then hold anything);
// `combine(d)` sets current = slot d + current (slot d is the left operand). Slots 0..tree_depth(n)-1 are used;
// `depth0` offsets them (a rank's subtree uses the same slots as its part of the whole tree would).
void tree_reduce(int64_t lo, int64_t n, const std::function<void(int64_t)>& leaf, const std::function<void(int)>& save,
                 const std::function<void(int)>& combine, int depth0 = 0);

// n values at p as the bytes PeerLink::sendrecv moves.
template <class T>
std::span<const std::byte> bytes_of(const T* p, size_t n) {
  return {reinterpret_cast<const std::byte*>(p), n * sizeof(T)};
}
template <class T>
std::span<std::byte> bytes_of(T* p, size_t n) {
  return {reinterpret_cast<std::byte*>(p), n * sizeof(T)};
}

// Point-to-point exchanges with one partner at a time (MPI_Sendrecv in train/dist.h; threads in tests).
class PeerLink {
 public:
  virtual ~PeerLink() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Sends `send` to `partner` and receives exactly recv.size() bytes from it (both sides call this together).
  virtual void sendrecv(int partner, std::span<const std::byte> send, std::span<std::byte> recv) = 0;
};

// Exchange statistics of one process since reset (the benchmark's communication share).
struct ExchangeStats {
  double seconds = 0;  // wall time inside the exchanges below (waiting for the partner included)
  double wait_seconds = 0;  // of which waiting at a synchronizing exchange before them (Session's measure_exchange)
  int64_t bytes_sent = 0;  // payload bytes sent by this rank
  int64_t messages = 0;
};

// The cross-rank levels of the tree for each kind of value; every rank ends with the same bits. The number of
// ranks must be a power of two. With one rank they return at once.
void tree_allreduce(PeerLink& link, std::span<float> v, std::vector<float>& scratch, ExchangeStats* st = nullptr);
void tree_allreduce(PeerLink& link, double& x, ExchangeStats* st = nullptr);
void tree_allreduce(PeerLink& link, SparseGrad& g, SparseGrad& scratch_recv, SparseGrad& scratch_out,
                    std::vector<std::byte>& buf, ExchangeStats* st = nullptr);

// The sparse gradient's tree levels when each rank owns a range of rows (train.table_sharding: rows): rank r
// ends with the rows in [bounds[r], bounds[r+1]) of the whole tree's sum, the same bits tree_allreduce gives those
// rows. Recursive halving by owner, nearest partner first: at distance d the pair (r, r ^ d) keeps the rows whose
// owner agrees with it in bit d and sends the partner the others, the lower group's list as the left operand. Each
// row travels at most log2 R times and only towards its owner (tree_allreduce sends every list to every rank).
void tree_reduce_scatter(PeerLink& link, SparseGrad& g, std::span<const int64_t> bounds, SparseGrad& scratch_recv,
                         SparseGrad& scratch_out, std::vector<std::byte>& buf, ExchangeStats* st = nullptr);

bool is_power_of_two(int64_t n);

// Checks that every rank holds the same 64-bit value (a config hash, a resume step): UserError naming `what`
// and a rank that differs otherwise. Recursive doubling of (lowest rank, value) pairs: every rank learns it.
void check_same_on_all_ranks(PeerLink& link, uint64_t value, const std::string& what);

}  // namespace pg
