// Corpus: a built corpus directory (text/<group>.<lang>.txt + manifest.json + DONE) mapped read-only and cut
// into documents. Documents in a file are separated by a line holding only the byte 0x1E ("\n\x1e\n").
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/mapped_file.h"

namespace pg::data {

// One document: bytes [begin, end) of text file `file` (the separator and its preceding '\n' excluded).
struct CorpusDocument {
  uint32_t file;
  uint64_t begin, end;
};

class Corpus {
 public:
  // Opens `dir`: requires DONE, manifest.json and at least one text/*.txt. Throws IoError
  // "corpus not built: <dir> (...; hint: <hint>)" when DONE or the manifest is missing.
  static Corpus open(const std::string& dir, const std::string& hint);

  const std::string& dir() const { return dir_; }
  const std::string& manifest() const { return manifest_; }  // manifest.json bytes
  // The corpus's identity, corpus_identity(manifest()): equal for two builds of the same text.
  uint64_t manifest_hash() const { return manifest_hash_; }
  size_t file_count() const { return files_.size(); }
  // "<group>.<lang>" of text file i (files are sorted by name).
  const std::string& source_name(size_t i) const { return names_[i]; }
  const std::vector<CorpusDocument>& documents() const { return docs_; }
  std::string_view text(const CorpusDocument& d) const {
    return files_[d.file].view().substr(d.begin, d.end - d.begin);
  }
  uint64_t total_bytes() const { return total_bytes_; }  // sum of document bytes

 private:
  std::string dir_, manifest_;
  uint64_t manifest_hash_ = 0, total_bytes_ = 0;
  std::vector<MappedFile> files_;
  std::vector<std::string> names_;
  std::vector<CorpusDocument> docs_;
};

// The manifest.json bytes of a built corpus (checks DONE too), without mapping its text; throws IoError
// "corpus not built: <dir> (...; hint: <hint>)".
std::string read_corpus_manifest(const std::string& dir, const std::string& hint);

// The identity of a corpus from its manifest.json bytes: xxh64 of "pagegram-corpus-content-v1 <content_hash>"
// when the manifest names the text's content hash (data/corpus/assemble.py), so two builds of the same text
// on two machines (whose manifests differ in `created` and `stage_seconds`) have one identity; xxh64 of the
// bytes for a manifest without one. Cache keys, token-store headers and the runs' `data` fingerprint use it.
uint64_t corpus_identity(const std::string& manifest);

// Cuts a text file's bytes into documents (appends to `out`, tagging them with `file`); empty documents
// are skipped and a last document without a trailing separator is kept.
void split_documents(std::string_view bytes, uint32_t file, std::vector<CorpusDocument>& out);

// Calls f(line) for each '\n'-separated line of `text`: k newlines give k+1 lines ("a\n" gives {"a", ""}),
// so joining the lines with '\n' restores `text` exactly (the newline tokens sit between lines).
template <class F>
void for_each_line(std::string_view text, F&& f) {
  size_t start = 0;
  for (;;) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) {
      f(text.substr(start));
      return;
    }
    f(text.substr(start, nl - start));
    start = nl + 1;
  }
}

}  // namespace pg::data
