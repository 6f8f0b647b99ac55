// Random tokens without a corpus: the one random-token generator, and a temporary dataset of random documents
// (`pagegram bench train --synthetic`: the same work per token as the corpus, no data build).
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>

#include "core/rng.h"
#include "data/pipeline.h"

namespace pg::data {

// Fills `out` with ids drawn uniformly from [0, vocab) by `rng`, in order.
void random_tokens(RngStream& rng, int64_t vocab, std::span<uint32_t> out);

// Train and held-out token stores of uniformly random documents of 8,192 tokens (RngStream(seed,
// "bench.synthetic")) in a fresh temporary directory, removed with this object. Train holds 4Mi tokens, held-out
// 4 validation windows of `context` + 1 tokens plus 8,192.
class SyntheticDataSet {
 public:
  SyntheticDataSet(int64_t vocab, int64_t context, uint64_t seed);
  ~SyntheticDataSet();
  SyntheticDataSet(const SyntheticDataSet&) = delete;
  SyntheticDataSet& operator=(const SyntheticDataSet&) = delete;
  const DataSet& dataset() const { return ds_; }

 private:
  std::filesystem::path dir_;
  DataSet ds_;
};

}  // namespace pg::data
