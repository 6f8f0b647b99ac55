// Tests of storage/eval_stream.h: a stream cut from a token store gives every position the same rows as the whole
// store (n-grams never depend on where the stream starts, docs/model.md §3), with document boundaries respected.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/rng.h"
#include "data/synthetic.h"
#include "data/token_store.h"
#include "storage/eval_stream.h"
#include "memory/layout.h"
#include "memory/ngram.h"

namespace pg {
namespace {

TEST(EvalStream, CutFromStoreMatchesWholeStore) {
  const std::string path =
      (std::filesystem::temp_directory_path() / str("pg_eval_stream_", getpid(), ".pgtok")).string();
  data::TokenStoreInfo info;
  info.vocab_size = 500;
  info.split = data::Split::kHeldout;
  RngStream r(1, "store");
  std::vector<std::vector<uint32_t>> docs;
  for (int d = 0; d < 40; ++d) {
    std::vector<uint32_t> doc(static_cast<size_t>(1 + r.below(30)));  // documents of 1..30 tokens
    for (auto& x : doc) x = static_cast<uint32_t>(r.below(500));
    docs.push_back(doc);
  }
  {
    data::TokenStoreWriter w(path, info, docs.size());
    for (const auto& d : docs) w.add_document(d, d.size());
    w.finish();
  }
  const data::TokenStore store = data::TokenStore::open(path);
  MemoryConfig m;
  m.layout = "pagegram";
  m.target_params = 1000000;
  auto L = make_layout(m, 384);
  const int64_t H = L->heads(), N = static_cast<int64_t>(store.n_tokens());
  std::vector<int64_t> all(static_cast<size_t>(N * H));
  std::vector<uint64_t> signs(static_cast<size_t>(N * H * L->sign_words()));
  store.with_ids([&](auto ids) { compute_addresses(*L, ids, store.doc_offsets(), 0, N, all.data(), signs.data()); });
  for (uint64_t begin : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{57}, uint64_t{200}}) {
    for (uint64_t n : {uint64_t{1}, uint64_t{100}, uint64_t{100000}}) {
      const EvalStream s = stream_from_store(store, begin, n, 3);
      const int64_t len = std::min<int64_t>(static_cast<int64_t>(n), N - static_cast<int64_t>(begin));
      ASSERT_EQ(s.size(), len);
      std::vector<int64_t> rows(static_cast<size_t>(len * H));
      stream_rows(*L, s, 0, len, rows.data());
      for (int64_t i = 0; i < len * H; ++i)
        ASSERT_EQ(rows[static_cast<size_t>(i)], all[static_cast<size_t>(static_cast<int64_t>(begin) * H + i)])
            << "begin " << begin << " entry " << i;
    }
  }
  EXPECT_THROW(stream_from_store(store, store.n_tokens() + 1, 5), UserError);
  std::filesystem::remove(path);
}

TEST(EvalStream, SplitsOfADataSet) {
  data::SyntheticDataSet syn(300, 16, 3);
  const data::DataSet& ds = syn.dataset();
  const uint64_t val = static_cast<uint64_t>(ds.val_tokens), held = ds.heldout->n_tokens();
  const SplitStream v = stream_from_split(ds, "validation", 0);
  EXPECT_EQ(v.available, val);
  EXPECT_EQ(static_cast<uint64_t>(v.stream.size()), val);
  EXPECT_EQ(v.stream.first, 0);  // nothing before the held-out store's start
  const SplitStream t = stream_from_split(ds, "test", 100);
  EXPECT_EQ(t.available, held - val);
  EXPECT_EQ(t.stream.size(), 100);
  EXPECT_GT(t.stream.first, 0);  // the ids before it complete its first n-grams
  EXPECT_EQ(t.stream.ids[static_cast<size_t>(t.stream.first)], ds.heldout->id(val));
  EXPECT_NE(t.desc.find("tokens [" + std::to_string(val) + ", " + std::to_string(val + 100) + ")"), std::string::npos)
      << t.desc;
  EXPECT_EQ(static_cast<uint64_t>(stream_from_split(ds, "heldout", 0).stream.size()), held);
  EXPECT_EQ(static_cast<uint64_t>(stream_from_split(ds, "train", 0).stream.size()), ds.train->n_tokens());
  EXPECT_THROW(stream_from_split(ds, "dev", 0), UserError);
  EXPECT_THROW(stream_from_split(ds, "test", -1), UserError);
}

}  // namespace
}  // namespace pg
