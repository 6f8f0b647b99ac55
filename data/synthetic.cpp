// Implementation of data/synthetic.h.
#include "data/synthetic.h"

#include <unistd.h>

#include <string>
#include <vector>

namespace pg::data {

void random_tokens(RngStream& rng, int64_t vocab, std::span<uint32_t> out) {
  for (auto& id : out) id = static_cast<uint32_t>(rng.below(static_cast<uint64_t>(vocab)));
}

SyntheticDataSet::SyntheticDataSet(int64_t vocab, int64_t context, uint64_t seed) {
  dir_ = std::filesystem::temp_directory_path() / ("pagegram-synthetic-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir_);
  RngStream rng(seed, "bench.synthetic");
  auto write = [&](const std::string& name, uint64_t tokens, Split split) {
    TokenStoreInfo info;
    info.vocab_size = static_cast<uint64_t>(vocab);
    info.split = split;
    const uint64_t doc = 8192, docs = (tokens + doc - 1) / doc;
    TokenStoreWriter w((dir_ / name).string(), info, docs);
    std::vector<uint32_t> ids(doc);
    for (uint64_t d = 0; d < docs; ++d) {
      random_tokens(rng, vocab, ids);
      w.add_document(ids, doc * 4);
    }
    w.finish();
    return std::make_shared<const TokenStore>(TokenStore::open((dir_ / name).string()));
  };
  ds_.train = write("train.pgtok", 4u << 20, Split::kTrain);
  ds_.heldout = write("heldout.pgtok", static_cast<uint64_t>(4 * (context + 1)) + 8192, Split::kHeldout);
  ds_.val_tokens = 4 * (context + 1);
}

SyntheticDataSet::~SyntheticDataSet() {
  ds_ = DataSet{};  // close the stores before their files go
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

}  // namespace pg::data
