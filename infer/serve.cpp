// Implementation of infer/serve.h.
#include "infer/serve.h"

#include <filesystem>
#include <istream>
#include <ostream>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/text.h"
#include "data/pipeline.h"
#include "infer/model_folder.h"
#include "infer/table_export.h"

namespace pg {

namespace {
// A data set holding only the tokenizer at `path` (what serving needs), checked against the model's vocabulary.
std::unique_ptr<data::DataSet> tokenizer_only(const std::string& path, int64_t vocab, const char* hint) {
  auto ds = std::make_unique<data::DataSet>();
  try {
    ds->tokenizer = std::make_shared<const data::Tokenizer>(path);
  } catch (const std::exception& e) {
    throw UserError(str("tokenizer ", path, ": not a sentencepiece model (", e.what(), ")"));
  }
  if (ds->tokenizer->vocab_size() != vocab)
    throw UserError(str("tokenizer ", path, ": ", ds->tokenizer->vocab_size(), " pieces, the checkpoint's ",
                        "model.vocab is ", vocab, " (hint: ", hint, ")"));
  return ds;
}
}  // namespace

std::unique_ptr<Engine> open_engine(const EngineOptions& options) {
  EngineOptions o = options;
  if (!o.model_dir.empty()) {  // a model folder: its checkpoint, tokenizer and table unless given
    if (!o.checkpoint.empty()) throw UserError("give --model or --checkpoint, not both");
    const ModelFolderPaths p = model_folder_paths(o.model_dir);
    o.checkpoint = p.checkpoint;
    if (o.table.empty()) o.table = p.table;
  }
  if (o.checkpoint.empty()) throw UserError("give --checkpoint FILE or --model DIR (the model to serve)");
  if (o.max_batch < 1 || o.max_batch > 4096) throw UserError(str("--batch ", o.max_batch, ": expected 1..4096"));
  if (o.cache_bytes > 0 &&
      o.table_mode != "direct")  // mmap's cache is the kernel's page cache: --cache would do nothing
    throw UserError(str("--cache ", o.cache_bytes, " bytes: only --table-mode direct has its own cache (", o.table_mode,
                        " reads through the kernel's page cache) (hint: drop --cache, or use --table-mode direct)"));
  TrainedModelOptions to;
  to.open_data = false;
  to.table_ready = true;  // the table's decay replayed: the values an export writes
  to.micro_batch = 1;  // the decoder has its own scratch
  to.table_rows = o.table.empty();  // served from a table file, the checkpoint's fp32 table is never held
  TrainedModel tm = load_trained_model(o.checkpoint, to);
  std::string no_tokenizer;  // why there is none, for the error of a request that needs one (ids-only use works)
  if (!o.tokenizer.empty() && !std::filesystem::is_regular_file(o.tokenizer))
    throw UserError(str("--tokenizer ", o.tokenizer, ": no such file (hint: the sentencepiece model, e.g. ",
                        "<cache>/tokenizers/<key>/spm.model, or leave --tokenizer out to use the data cache's)"));
  const std::string tokenizer = find_tokenizer(o.checkpoint, o.tokenizer, &no_tokenizer);
  if (!tokenizer.empty())
    tm.data = tokenizer_only(tokenizer, tm.cfg().model.vocab,
                             o.tokenizer.empty() ? "the cache or the folder holds another model's tokenizer"
                                                 : "the tokenizer of another model");
  std::unique_ptr<TableSource> src;
  if (!o.table.empty()) {
    if (!tm.mem()) throw UserError(str("--table ", o.table, ": ", o.checkpoint, " was trained without a memory table"));
    // The checkpoint's table streamed through the digest (a table larger than this process serves from disk).
    check_table_fingerprint(o.table, o.checkpoint, saved_table_fingerprint(o.checkpoint, tm.mem()->table()));
    src = open_table_file(o.table, tm.mem()->table().layout(), tm.cfg().memory, tm.cfg().model.d_model,
                          tm.data && tm.data->tokenizer ? tm.data->tokenizer->pieces() : std::vector<std::string>{},
                          {.mode = o.table_mode, .cache_bytes = o.cache_bytes, .progress = o.progress});
  } else if (o.table_mode == "direct" || o.cache_bytes > 0) {
    throw UserError(
        "--table-mode direct and --cache need --table FILE.pgt (hint: pagegram export --checkpoint C --out T.pgt)");
  }
  auto e = std::make_unique<Engine>(std::move(tm), std::move(src), o.max_batch, o.overlap);
  e->set_tokenizer_note(no_tokenizer);
  return e;
}

namespace {

int64_t parse_int(const std::string& s, const std::string& what) {
  size_t n = 0;
  int64_t v = 0;
  try {
    v = std::stoll(s, &n);
  } catch (...) {
    n = 0;
  }
  if (n == 0 || n != s.size()) throw UserError(str(what, ": '", s, "' is not an integer"));
  return v;
}

// key=value options of open / fork.
SamplingOptions parse_sampling(std::istringstream& in) {
  SamplingOptions so;
  std::string kv;
  while (in >> kv) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos)
      throw UserError(str("option '", kv, "': expected key=value (seed, temperature, top_k, top_p, min_p, ...)"));
    const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    if (k == "seed") {
      so.seed = static_cast<uint64_t>(parse_int(v, "seed"));
    } else if (k == "temperature") {
      try {
        size_t n = 0;
        so.temperature = std::stod(v, &n);
        if (n != v.size()) throw 0;
      } catch (...) {
        throw UserError(str("temperature: '", v, "' is not a number"));
      }
    } else if (k == "top_k") {
      so.top_k = parse_int(v, "top_k");
    } else if (k == "top_p" || k == "min_p" || k == "repetition_penalty") {
      try {
        size_t n = 0;
        const double x = std::stod(v, &n);
        if (n != v.size()) throw 0;
        (k == "top_p" ? so.top_p : k == "min_p" ? so.min_p : so.repetition_penalty) = x;
      } catch (...) {
        throw UserError(str(k, ": '", v, "' is not a number"));
      }
    } else if (k == "repeat_last_n") {
      so.repeat_last_n = parse_int(v, "repeat_last_n");
    } else {
      throw UserError(str("option '", k,
                          "': expected seed, temperature, top_k, top_p, min_p, repetition_penalty or repeat_last_n"));
    }
  }
  return so;
}

std::string stats_json(Engine& e) {
  const EngineStats& s = e.stats();
  std::ostringstream o;
  o << "{\"prefill_tokens\":" << s.prefill_tokens << ",\"decode_tokens\":" << s.decode_tokens
    << ",\"prefill_seconds\":" << s.prefill_seconds << ",\"decode_seconds\":" << s.decode_seconds
    << ",\"restarts\":" << s.restarts << ",\"memory_seconds\":" << s.memory_seconds
    << ",\"memory_wait_seconds\":" << s.memory_wait_seconds << ",\"fetch_seconds\":" << s.fetch_seconds
    << ",\"overlap\":" << (e.overlaps() ? "true" : "false");
  if (e.source()) {
    const TableReadStats& r = e.source()->stats();
    o << ",\"table\":" << json_escape(e.source()->describe()) << ",\"positions\":" << r.positions
      << ",\"block_accesses\":" << r.block_accesses << ",\"device_reads\":" << r.device_reads
      << ",\"device_bytes\":" << r.device_bytes << ",\"io_seconds\":" << r.io_seconds;
  }
  o << "}";
  return o.str();
}

std::string handle(Engine& e, const std::string& line, bool& quit) {
  std::istringstream in(line);
  std::string cmd;
  in >> cmd;
  auto session = [&] {
    std::string s;
    if (!(in >> s)) throw UserError(str(cmd, ": missing session id"));
    const int64_t id = parse_int(s, "session");
    if (!e.has(id)) throw UserError(str("no session ", id));
    return id;
  };
  // A request whose words run past what it takes is refused before it acts (`close 1 2` does not close 1).
  auto done = [&]() -> void {
    std::string extra;
    if (in >> extra)
      throw UserError(str(cmd, ": unexpected '", extra, "' after the request (hint: `", cmd,
                          cmd == "stats" || cmd == "quit" ? "" : " <id>", "`)"));
  };
  if (cmd == "open") return str("ok ", e.open(parse_sampling(in)));
  if (cmd == "fork") {
    const int64_t id = session();
    return str("ok ", e.fork(id, parse_sampling(in)));
  }
  if (cmd == "feed") {
    const int64_t id = session();
    std::string text;
    std::getline(in, text);
    if (!text.empty() && text[0] == ' ') text.erase(0, 1);
    const std::vector<int32_t> ids = e.encode(text);
    e.feed(id, ids);
    return str("ok ", ids.size());
  }
  if (cmd == "feed_ids") {
    const int64_t id = session();
    std::vector<int32_t> ids;
    std::string t;
    while (in >> t) ids.push_back(static_cast<int32_t>(parse_int(t, "token id")));
    e.feed(id, ids);
    return str("ok ", ids.size());
  }
  if (cmd == "generate") {
    const int64_t id = session();
    std::string n;
    if (!(in >> n)) throw UserError("generate: missing token count");
    const int64_t count = parse_int(n, "token count");
    done();
    if (count < 0 || count > 1000000) throw UserError(str("generate: ", count, " tokens (expected 0..1000000)"));
    std::vector<int32_t> out;
    const int64_t ids[1] = {id};
    for (int64_t i = 0; i < count && (out.empty() || out.back() != e.eos_id()); ++i) out.push_back(e.step(ids)[0]);
    // stops after an end-of-document token (as generate does); the reply's text ends with its newline then
    return str("ok ", json_escape(e.tokenizer() ? e.decode_tail(id, static_cast<int64_t>(out.size())) : std::string()));
  }
  if (cmd == "step") {
    std::vector<int64_t> ids;
    std::string t;
    while (in >> t) ids.push_back(parse_int(t, "session"));
    if (ids.empty()) throw UserError("step: no sessions");
    std::string r = "ok";
    for (int32_t tok : e.step(ids)) r += str(" ", tok);
    return r;
  }
  if (cmd == "boundary" || cmd == "reset" || cmd == "close") {
    const int64_t id = session();
    done();
    if (cmd == "boundary") e.boundary(id);
    else if (cmd == "reset") e.reset(id);
    else e.close(id);
    return "ok";
  }
  if (cmd == "stats") return done(), "ok " + stats_json(e);
  if (cmd == "quit") return done(), quit = true, "ok";
  throw UserError(str("unknown request '", cmd,
                      "' (open, feed, feed_ids, generate, step, boundary, reset, fork, close, stats, quit)"));
}

}  // namespace

void serve(Engine& e, std::istream& in, std::ostream& out) {
  std::string line;
  bool quit = false;
  while (!quit && std::getline(in, line)) {
    if (line.size() > (size_t{1} << 20)) {
      out << "error request line of " << line.size() << " bytes (at most 1 MiB)\n" << std::flush;
      continue;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string reply;
    try {
      reply = handle(e, line, quit);
    } catch (const UserError& err) {
      std::string m = err.what();
      for (char& c : m)
        if (c == '\n') c = ' ';
      reply = "error " + m;
    }
    out << reply << "\n" << std::flush;
  }
}

}  // namespace pg
