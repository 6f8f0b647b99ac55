// Engram's compressed vocabulary (docs/model.md §3, "Engram-faithful hashing"): token texts normalized by
// NFKC -> NFD -> strip accents -> lowercase -> collapse [ \t\r\n]+ to one space -> trim (a lone space kept),
// and new ids given by first appearance. Tokens whose text holds U+FFFD keep their raw piece as key.
//
// Coverage of the normalization (what merges tokens; a canonical decomposition that merges nothing does not
// change the id map, so e.g. Hangul and CJK need no tables): ASCII; Latin-1 Supplement (letters with
// diacritics to their base letter, case, NBSP, ª º ¹ ² ³ µ ¼ ½ ¾ and the spacing diacritics); Latin
// Extended-A (U+0100-017F, incl. Ĳ ĳ Ŀ ŀ ŉ ſ); combining marks U+0300-036F, 1AB0-1AFF, 1DC0-1DFF,
// 20D0-20FF, FE20-FE2F, 3099-309A; Greek tonos/dialytika letters and case (U+0386-03CE); Cyrillic
// U+0400-045F (й→и, ё→е, ї→і, ў→у, ... and case); Hiragana/Katakana voiced and semi-voiced kana (が→か);
// fullwidth ASCII U+FF01-FF5E; Unicode spaces U+2000-200A, 202F, 205F, 3000; ligatures U+FB00-FB06.
// Not covered (passed through unchanged): other compatibility forms (halfwidth katakana, circled and
// squared forms, Arabic presentation forms, ...), Latin Extended-B and Additional (Vietnamese), other
// scripts' case and nonspacing marks (Hebrew, Arabic, Thai, Devanagari, ...).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "memory/config.h"

namespace pg {

// The normalized text of one token (UTF-8 in, UTF-8 out). Invalid UTF-8 is returned unchanged.
std::string engram_normalize(const std::string& text);

struct CompressedVocab {
  std::vector<uint32_t> map;  // [vocab]: token id -> compressed id
  uint32_t size = 0;  // number of compressed ids; the boundary (pad) id is `size`
};

// Engram's rule: key = raw piece if the text holds U+FFFD (or is invalid UTF-8), else the normalized text,
// or the text itself when normalization leaves nothing; ids by first appearance in token-id order.
CompressedVocab compress_vocabulary(const std::vector<std::string>& texts, const std::vector<std::string>& pieces);

// The decoded text of each sentencepiece piece as Engram would see it: U+2581 becomes a space, byte pieces
// <0x80>..<0xFF> (a lone byte of a multi-byte character) become U+FFFD, everything else is unchanged.
std::vector<std::string> sentencepiece_piece_texts(const std::vector<std::string>& pieces);

// The compressed vocabulary a layout needs, from the tokenizer's pieces (id order): nullptr unless the layout is
// engram with memory.hash.engram_faithful (no other layout reads it); ConfigError when it is needed and `pieces` is
// empty (no tokenizer). The one builder of it: training and the storage tools both call this.
std::unique_ptr<CompressedVocab> engram_vocab(const MemoryConfig& m, const std::vector<std::string>& pieces);

}  // namespace pg
