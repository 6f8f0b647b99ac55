// Token store writer (staged file, pwrite, checksums, rename) and validating reader (data/token_store.h).
#include "data/token_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "data/hash.h"

namespace pg::data {
namespace {

constexpr size_t kHeaderHashAt = 120;
constexpr size_t kMinFileBytes = kTokenStoreHeaderBytes + 8 + 8;  // header, doc_offsets[0], payload_hash
constexpr size_t kWriteBuffer = size_t{4} << 20;

uint64_t pad8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

template <class T>
void put(uint8_t* h, size_t at, T v) {
  std::memcpy(h + at, &v, sizeof v);
}
template <class T>
T get(const uint8_t* h, size_t at) {
  T v;
  std::memcpy(&v, h + at, sizeof v);
  return v;
}

void pwrite_all(int fd, const void* p, size_t n, uint64_t at, const std::string& path) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::pwrite(fd, c, n, static_cast<off_t>(at));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      throw ResourceError(str("cannot write ", path, " at byte offset ", at, ": ", std::strerror(errno),
                              " (hint: check free disk space)"));
    c += w;
    n -= static_cast<size_t>(w);
    at += static_cast<uint64_t>(w);
  }
}

[[noreturn]] void fail(const std::string& path, const std::string& field, uint64_t offset, const std::string& what,
                       const TokenStoreOpenOptions& opt) {
  throw IoError(str("token store ", path, ": ", field, " at byte offset ", offset, ": ", what, " (hint: rebuild with `",
                    opt.rebuild_command, "`)"));
}

// Parses and checks the header of a mapped file of `size` bytes (sizes, hashes of header, options).
TokenStoreHeader parse_header(const uint8_t* d, uint64_t size, const std::string& path,
                              const TokenStoreOpenOptions& opt) {
  if (size < kMinFileBytes)
    fail(path, "header", size, str("file is truncated: ", size, " bytes, a token store has at least ", kMinFileBytes),
         opt);
  if (std::memcmp(d, kTokenStoreMagic, 8) != 0) {
    std::string m;
    for (int i = 0; i < 8; ++i) m += (d[i] >= 32 && d[i] < 127) ? static_cast<char>(d[i]) : '?';
    fail(path, "magic", 0, str("not a token store (magic '", m, "', expected 'PGTOKENS')"), opt);
  }
  const uint64_t stored = get<uint64_t>(d, kHeaderHashAt), computed = xxh64_bytes(d, kHeaderHashAt);
  if (stored != computed)
    fail(path, "header_hash", kHeaderHashAt,
         str("header checksum mismatch (stored ", hex64(stored), ", computed ", hex64(computed), "): corrupt header"),
         opt);
  TokenStoreHeader h;
  h.version = get<uint32_t>(d, 8);
  h.id_bytes = get<uint32_t>(d, 12);
  h.info.vocab_size = get<uint64_t>(d, 16);
  h.n_docs = get<uint64_t>(d, 24);
  h.n_tokens = get<uint64_t>(d, 32);
  h.info.tokenizer_hash = get<uint64_t>(d, 40);
  h.info.manifest_hash = get<uint64_t>(d, 48);
  h.info.split_seed = get<uint64_t>(d, 56);
  h.info.heldout_fraction = get<double>(d, 64);
  h.info.split = static_cast<Split>(get<uint32_t>(d, 72));
  h.info.eos_id = get<uint32_t>(d, 76);
  h.text_bytes = get<uint64_t>(d, 80);
  h.info.newline_id = get<uint32_t>(d, 88);
  if (h.version != kTokenStoreVersion)
    fail(path, "format_version", 8, str("version ", h.version, ", this build reads version ", kTokenStoreVersion), opt);
  if (h.id_bytes != 2 && h.id_bytes != 4)
    fail(path, "id_bytes", 12, str("id width ", h.id_bytes, ", expected 2 or 4"), opt);
  if (h.info.vocab_size == 0 || h.info.vocab_size > (uint64_t{1} << 32) ||
      (h.id_bytes == 2 && h.info.vocab_size > 65536))
    fail(path, "vocab_size", 16, str("vocab_size ", h.info.vocab_size, " does not fit id width ", h.id_bytes), opt);
  // Sizes: compare in a form that cannot overflow (each count is bounded by the file size first).
  const bool plausible = h.n_docs < size / 8 && h.n_tokens <= size;
  const uint64_t expected =
      plausible ? kTokenStoreHeaderBytes + 8 * (h.n_docs + 1) + pad8(h.n_tokens * h.id_bytes) + 8 : UINT64_MAX;
  if (expected != size)
    fail(path, "file size", std::min(size, expected),
         str("file has ", size, " bytes but the header (n_docs ", h.n_docs, ", n_tokens ", h.n_tokens, ", id_bytes ",
             h.id_bytes, ") implies ", plausible ? str(expected) : std::string("more"),
             ": truncated, extended or corrupt"),
         opt);
  if (opt.tokenizer_hash && *opt.tokenizer_hash != h.info.tokenizer_hash)
    fail(path, "tokenizer_hash", 40,
         str("built with tokenizer ", hex64(h.info.tokenizer_hash), ", expected ", hex64(*opt.tokenizer_hash),
             " (the tokenizer model changed)"),
         opt);
  if (opt.vocab_size && *opt.vocab_size != h.info.vocab_size)
    fail(path, "vocab_size", 16, str("vocab_size ", h.info.vocab_size, ", expected ", *opt.vocab_size), opt);
  return h;
}

}  // namespace

// ---------------------------------------------------------------- writer ----

TokenStoreWriter::TokenStoreWriter(std::string path, const TokenStoreInfo& info, uint64_t n_docs)
    : path_(std::move(path)), info_(info), n_docs_(n_docs), id_bytes_(id_bytes_for_vocab(info.vocab_size)) {
  PG_CHECK(info.vocab_size > 0 && info.vocab_size <= (uint64_t{1} << 32), "vocab_size ", info.vocab_size);
  tmp_ = staging_path(path_);
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw IoError(str("cannot create ", tmp_, ": ", std::strerror(errno), " (hint: check the cache directory)"));
  ids_begin_ = kTokenStoreHeaderBytes + 8 * (n_docs + 1);
  write_pos_ = ids_begin_;
  offsets_.reserve(n_docs + 1);
  offsets_.push_back(0);
  buf_.reserve(kWriteBuffer + 4096);
}

TokenStoreWriter::~TokenStoreWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_) ::unlink(tmp_.c_str());
}

void TokenStoreWriter::flush() {
  if (buf_.empty()) return;
  pwrite_all(fd_, buf_.data(), buf_.size(), write_pos_, tmp_);
  write_pos_ += buf_.size();
  buf_.clear();
}

void TokenStoreWriter::add_document(std::span<const uint32_t> ids, uint64_t text_bytes) {
  PG_CHECK(!finished_ && offsets_.size() <= n_docs_, "more documents than announced (", n_docs_, ")");
  uint32_t max_id = 0;
  for (uint32_t id : ids) max_id = std::max(max_id, id);
  PG_CHECK(ids.empty() || max_id < info_.vocab_size, "id ", max_id, " >= vocab_size ", info_.vocab_size);
  for (size_t i = 0; i < ids.size();) {
    const size_t n = std::min(ids.size() - i, size_t{1} << 20);
    const size_t old = buf_.size();
    buf_.resize(old + n * id_bytes_);
    uint8_t* dst = buf_.data() + old;
    if (id_bytes_ == 2) {
      for (size_t k = 0; k < n; ++k) {
        const auto v = static_cast<uint16_t>(ids[i + k]);
        std::memcpy(dst + 2 * k, &v, 2);
      }
    } else {
      std::memcpy(dst, ids.data() + i, n * 4);
    }
    i += n;
    if (buf_.size() >= kWriteBuffer) flush();
  }
  n_tokens_ += ids.size();
  text_bytes_ += text_bytes;
  offsets_.push_back(n_tokens_);
}

void TokenStoreWriter::finish() {
  PG_CHECK(!finished_, "finish() called twice");
  PG_CHECK(offsets_.size() == n_docs_ + 1, "announced ", n_docs_, " documents, got ", offsets_.size() - 1);
  flush();
  const uint64_t ids_end = ids_begin_ + n_tokens_ * id_bytes_;
  PG_CHECK(write_pos_ == ids_end);
  const uint64_t payload_end = kTokenStoreHeaderBytes + 8 * (n_docs_ + 1) + pad8(n_tokens_ * id_bytes_);
  const uint8_t zeros[8] = {};
  pwrite_all(fd_, zeros, payload_end - ids_end, ids_end, tmp_);
  pwrite_all(fd_, offsets_.data(), offsets_.size() * 8, kTokenStoreHeaderBytes, tmp_);

  uint8_t h[kTokenStoreHeaderBytes] = {};
  std::memcpy(h, kTokenStoreMagic, 8);
  put<uint32_t>(h, 8, kTokenStoreVersion);
  put<uint32_t>(h, 12, id_bytes_);
  put<uint64_t>(h, 16, info_.vocab_size);
  put<uint64_t>(h, 24, n_docs_);
  put<uint64_t>(h, 32, n_tokens_);
  put<uint64_t>(h, 40, info_.tokenizer_hash);
  put<uint64_t>(h, 48, info_.manifest_hash);
  put<uint64_t>(h, 56, info_.split_seed);
  put<double>(h, 64, info_.heldout_fraction);
  put<uint32_t>(h, 72, static_cast<uint32_t>(info_.split));
  put<uint32_t>(h, 76, info_.eos_id);
  put<uint64_t>(h, 80, text_bytes_);
  put<uint32_t>(h, 88, info_.newline_id);
  put<uint64_t>(h, kHeaderHashAt, xxh64_bytes(h, kHeaderHashAt));
  pwrite_all(fd_, h, sizeof h, 0, tmp_);

  uint64_t payload_hash;
  {
    MappedFile m(tmp_);  // the page cache holds what pwrite wrote
    PG_CHECK(m.size() == payload_end, "staged size ", m.size(), " != ", payload_end);
    payload_hash = xxh64_bytes(m.data() + kTokenStoreHeaderBytes, payload_end - kTokenStoreHeaderBytes);
  }
  pwrite_all(fd_, &payload_hash, 8, payload_end, tmp_);
  if (::fdatasync(fd_) != 0 || ::close(fd_) != 0) {
    fd_ = -1;
    throw ResourceError(str("cannot write ", tmp_, ": ", std::strerror(errno), " (hint: check free disk space)"));
  }
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0)
    throw ResourceError(str("cannot rename ", tmp_, " to ", path_, ": ", std::strerror(errno)));
  finished_ = true;
}

// ---------------------------------------------------------------- reader ----

TokenStoreHeader TokenStore::read_header(const std::string& path, const TokenStoreOpenOptions& opt) {
  MappedFile f(path);
  return parse_header(f.data(), f.size(), path, opt);
}

TokenStore TokenStore::open(const std::string& path, const TokenStoreOpenOptions& opt) {
  TokenStore s;
  s.file_ = MappedFile(path, /*populate=*/true);
  const uint8_t* d = s.file_.data();
  const uint64_t size = s.file_.size();
  s.h_ = parse_header(d, size, path, opt);
  const TokenStoreHeader& h = s.h_;

  const uint64_t stored = get<uint64_t>(d, size - 8);
  const uint64_t computed = xxh64_bytes(d + kTokenStoreHeaderBytes, size - 8 - kTokenStoreHeaderBytes);
  if (stored != computed)
    fail(path, "payload_hash", size - 8,
         str("payload checksum mismatch (stored ", hex64(stored), ", computed ", hex64(computed),
             "): the document offsets or ids are corrupt"),
         opt);

  s.offsets_ = {reinterpret_cast<const uint64_t*>(d + kTokenStoreHeaderBytes), h.n_docs + 1};
  auto off_at = [&](uint64_t i) { return kTokenStoreHeaderBytes + 8 * i; };
  if (s.offsets_[0] != 0) fail(path, "doc_offsets[0]", off_at(0), str("is ", s.offsets_[0], ", expected 0"), opt);
  for (uint64_t i = 1; i <= h.n_docs; ++i)
    if (s.offsets_[i] < s.offsets_[i - 1] || s.offsets_[i] > h.n_tokens)
      fail(path, str("doc_offsets[", i, "]"), off_at(i),
           str("is ", s.offsets_[i], " after ", s.offsets_[i - 1], " (n_tokens ", h.n_tokens, ")"), opt);
  if (s.offsets_[h.n_docs] != h.n_tokens)
    fail(path, str("doc_offsets[", h.n_docs, "]"), off_at(h.n_docs),
         str("is ", s.offsets_[h.n_docs], ", expected n_tokens ", h.n_tokens), opt);

  const uint64_t ids_at = off_at(h.n_docs + 1);
  if (h.id_bytes == 2) s.ids16_ = {reinterpret_cast<const uint16_t*>(d + ids_at), h.n_tokens};
  else s.ids32_ = {reinterpret_cast<const uint32_t*>(d + ids_at), h.n_tokens};
  const uint64_t vocab = h.info.vocab_size;
  s.with_ids([&](auto ids) {
    uint64_t max_id = 0;  // branch-free scan first; locate the offender only on failure
    for (auto v : ids) max_id = std::max<uint64_t>(max_id, v);
    if (max_id < vocab) return;
    for (uint64_t i = 0; i < ids.size(); ++i)
      if (ids[i] >= vocab)
        fail(path, str("ids[", i, "]"), ids_at + i * h.id_bytes, str("id ", ids[i], " >= vocab_size ", vocab), opt);
  });
  return s;
}

void TokenStore::copy(uint64_t pos, uint64_t n, int32_t* out) const {
  PG_CHECK(pos <= h_.n_tokens && n <= h_.n_tokens - pos, "copy [", pos, ", +", n, ") of ", h_.n_tokens);
  if (h_.id_bytes == 2) {
    const uint16_t* src = ids16_.data() + pos;
    for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(src[i]);
  } else {
    std::memcpy(out, ids32_.data() + pos, n * 4);
  }
}

uint64_t TokenStore::doc_of(uint64_t pos) const {
  PG_CHECK(pos < h_.n_tokens, "position ", pos, " of ", h_.n_tokens);
  auto it = std::upper_bound(offsets_.begin(), offsets_.end(), pos);
  return static_cast<uint64_t>(it - offsets_.begin()) - 1;
}

}  // namespace pg::data
