// Implementation of infer/model_folder.h.
#include "infer/model_folder.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/h5.h"
#include "core/output.h"
#include "core/text.h"
#include "data/pipeline.h"
#include "train/checkpoint.h"
#include "train/trained_model.h"

namespace pg {

namespace fs = std::filesystem;

ModelFolderPaths model_folder_paths(const std::string& dir) {
  if (!fs::is_directory(dir))
    throw UserError(
        str("--model ", dir, ": not a folder (hint: pagegram export --checkpoint C --model-dir ", dir, " writes one)"));
  ModelFolderPaths p;
  p.checkpoint = (fs::path(dir) / "checkpoint.h5").string();
  p.tokenizer = (fs::path(dir) / "tokenizer.model").string();
  const std::string table = (fs::path(dir) / "table.pgt").string();
  for (const std::string& f : {p.checkpoint, p.tokenizer})
    if (!fs::is_regular_file(f))
      throw UserError(str("--model ", dir, ": no ", fs::path(f).filename().string(),
                          " in the folder (hint: a model folder holds checkpoint.h5, tokenizer.model and, with a "
                          "memory table, table.pgt: pagegram export --checkpoint C --model-dir ",
                          dir, ")"));
  if (fs::exists(table)) p.table = table;
  return p;
}

std::string find_tokenizer(const std::string& checkpoint, const std::string& given, std::string* why) {
  if (!given.empty()) return given;
  const std::string beside = (fs::path(checkpoint).parent_path() / "tokenizer.model").string();
  if (fs::exists(beside)) return beside;
  const ExperimentConfig cfg = checkpoint_config(checkpoint);
  const data::TokenizerPaths tp = data::tokenizer_paths(cfg.data, cfg.tokenizer);
  if (tp.cache_hit) return tp.model;
  if (why)
    *why = str("the checkpoint's tokenizer ", tp.model, " is not in the data cache, nor tokenizer.model beside ",
               checkpoint, " (hint: pagegram data tokenizer --config <the checkpoint's config>, or --tokenizer FILE)");
  return "";
}

namespace {
// Copies `from` to `to` through a temp file beside it and a rename (fsync'ed): never a half-written file.
void copy_atomic(const std::string& from, const std::string& to) {
  const std::string tmp = to + ".tmp";
  std::error_code ec;
  fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
  if (ec) throw IoError(str("copying ", from, " to ", tmp, ": ", ec.message()));
  h5::commit_atomic(tmp, to);
}

// An open file (read-only), closed with this object: what it copies stays the file opened, whatever replaces or
// removes its name meanwhile.
class OpenFile {
 public:
  explicit OpenFile(const std::string& path) : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) throw IoError(str("cannot open ", path, ": ", std::strerror(errno)));
  }
  OpenFile(OpenFile&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_) { o.fd_ = -1; }
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  OpenFile& operator=(OpenFile&&) = delete;
  ~OpenFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  std::string proc_path() const { return "/proc/self/fd/" + std::to_string(fd_); }  // the open file, by name
  // Its bytes to `to` (created or truncated; written with checked writes, not yet fsync'ed).
  void copy_to(const std::string& to) const {
    const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) throw IoError(str("cannot create ", to, ": ", std::strerror(errno)));
    std::vector<char> buf(size_t{8} << 20);
    off_t at = 0;
    const auto fail = [&](const char* what) {
      const int e = errno;
      ::close(out);
      h5::remove_quietly(to);
      return IoError(str("copying ", path_, " to ", to, ": ", what, " failed: ", std::strerror(e),
                         " (hint: free disk space; the folder's previous files are kept)"));
    };
    for (;;) {
      const ssize_t n = ::pread(fd_, buf.data(), buf.size(), at);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw fail("read");
      if (n == 0) break;
      for (ssize_t done = 0; done < n;) {
        const ssize_t w = ::write(out, buf.data() + done, static_cast<size_t>(n - done));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) throw fail("write");
        done += w;
      }
      at += n;
    }
    if (::close(out) != 0) {
      h5::remove_quietly(to);
      throw IoError(str("copying ", path_, " to ", to, ": close failed: ", std::strerror(errno)));
    }
  }

 private:
  std::string path_;
  int fd_;
};
}  // namespace

ModelFolderResult write_model_folder(const ModelFolderOptions& o) {
  if (o.checkpoint.empty()) throw UserError("export --model-dir needs --checkpoint (the trained model to serve)");
  std::string why;
  const std::string tokenizer = find_tokenizer(o.checkpoint, o.tokenizer, &why);
  if (tokenizer.empty()) throw UserError(str("export --model-dir: ", why));
  if (!fs::is_regular_file(tokenizer))
    throw UserError(str("--tokenizer ", tokenizer, ": no such file (hint: the sentencepiece model the checkpoint was ",
                        "trained with)"));
  if (fs::exists(o.dir) && !fs::is_directory(o.dir))
    throw UserError(str("--model-dir ", o.dir, ": exists and is not a folder (hint: another path)"));
  fs::create_directories(o.dir);
  ModelFolderResult r;
  r.paths.checkpoint = (fs::path(o.dir) / "checkpoint.h5").string();
  r.paths.tokenizer = (fs::path(o.dir) / "tokenizer.model").string();
  const std::string table = (fs::path(o.dir) / "table.pgt").string();
  if (fs::exists(r.paths.checkpoint) && fs::equivalent(r.paths.checkpoint, o.checkpoint))
    throw UserError(str("--model-dir ", o.dir, ": is the checkpoint's own folder (hint: a new folder)"));
  check_output_path(r.paths.checkpoint, "pagegram-checkpoint", o.force, "--model-dir");
  check_output_path(r.paths.tokenizer, "file", o.force, "--model-dir");
  check_output_path(table, "pagegram-table", o.force, "--model-dir");
  // The tokenizer must be the model's: its piece count is the checkpoint's vocabulary (serving checks it again).
  const ExperimentConfig cfg = checkpoint_config(o.checkpoint);
  const data::Tokenizer tk(tokenizer);
  if (tk.vocab_size() != cfg.model.vocab)
    throw UserError(str("tokenizer ", tokenizer, ": ", tk.vocab_size(), " pieces, the checkpoint's model.vocab is ",
                        cfg.model.vocab, " (hint: the tokenizer the checkpoint was trained with)"));
  copy_atomic(tokenizer, r.paths.tokenizer);
  // The checkpoint is copied first and the table exported from the copy, so the folder holds one checkpoint even
  // while a training replaces its own. A checkpoint of a table sharded by rows maps its shard files: they come
  // along. The checkpoint and every shard file it maps are opened first (a training replacing them meanwhile cannot
  // remove what this copies), then copied: shards first, the checkpoint last (as training writes them), each through
  // a temp file and a rename; shard files of an earlier export into this folder go.
  const OpenFile ckpt(o.checkpoint);
  std::vector<std::pair<OpenFile, std::string>> shard_files;  // open source, destination
  std::vector<std::string> shards;
  for (const std::string& f : checkpoint_shard_files(ckpt.proc_path())) {
    const std::string name = fs::path(f).filename().string();
    shards.push_back((fs::path(o.dir) / name).string());
    shard_files.emplace_back(OpenFile((fs::path(checkpoint_folder(o.checkpoint)) / name).string()), shards.back());
  }
  for (const auto& [from, to] : shard_files) {
    from.copy_to(to + ".tmp");
    h5::commit_atomic(to + ".tmp", to);
  }
  ckpt.copy_to(r.paths.checkpoint + ".tmp");
  h5::commit_atomic(r.paths.checkpoint + ".tmp", r.paths.checkpoint);
  remove_stale_table_shards(r.paths.checkpoint, shards);
  if (cfg.memory.enabled()) {
    TableExportOptions eo;
    eo.checkpoint = r.paths.checkpoint;
    eo.quantization = o.quantization;
    eo.info = o.info;
    eo.info.push_back({"trained_checkpoint", o.checkpoint});  // where the folder's checkpoint was copied from
    r.table = export_table(eo, table);
    r.paths.table = table;
    r.has_table = true;
  } else if (fs::exists(table)) {
    fs::remove(table);  // a table of an earlier export would be served beside a model without one
  }
  return r;
}

}  // namespace pg
