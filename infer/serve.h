// Opening an engine from command-line choices, and `pagegram serve`: a line protocol on a stream holding several
// sessions (docs/serving.md). One request per line, one reply line per request:
// clang-format off
//
//   open [key=value ...]              ok <session>        keys: seed, temperature, top_k, top_p, min_p,
//                                                         repetition_penalty, repeat_last_n (SamplingOptions)
//   feed <s> <text>                   ok <tokens fed>     (the text's tokens, no end of document)
//   feed_ids <s> <id> <id> ...        ok <tokens fed>
//   generate <s> <n>                  ok <json string>    (up to n tokens, one step at a time; stops after an EOS)
//   step <s> <s> ...                  ok <id> <id> ...    (one decode step, every listed session batched)
//   boundary <s> | reset <s> | close <s>   ok
//   fork <s> [key=value ...]          ok <new session>
//   stats                             ok <json object>
//   quit                              ok                  (and the server returns)
//
// clang-format on
// A bad request gets "error <message>" and the server goes on. Lines are at most 1 MiB. The HTTP API is infer/http.h.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>

#include "infer/engine.h"

namespace pg {

struct EngineOptions {
  std::string checkpoint;  // or
  std::string model_dir;  // a model folder (infer/model_folder.h): its checkpoint, tokenizer and table
  std::string table;  // .pgt file; empty: the checkpoint's fp32 table in RAM
  // The sentencepiece model to serve with. Empty: `tokenizer.model` beside the checkpoint when there is one (a model
  // folder copied without the corpus), else the checkpoint config's tokenizer in the data cache.
  std::string tokenizer;
  std::string table_mode = "mmap";  // mmap | mmap-warm | direct
  int64_t cache_bytes = 0;  // direct: LRU page cache
  int64_t max_batch = 64;
  bool overlap = true;  // table reads beside the blocks before the first injection (infer/engine.h)
  bool progress = true;
};
// Loads the checkpoint (its tokenizer when available) and opens the table source. UserError for a mode or a table
// that does not fit (the file's identity must match the checkpoint's layout).
std::unique_ptr<Engine> open_engine(const EngineOptions& o);

// Serves requests from `in` until "quit" or end of input; replies on `out` (flushed per line).
void serve(Engine& e, std::istream& in, std::ostream& out);

}  // namespace pg
