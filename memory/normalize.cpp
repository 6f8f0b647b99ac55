// Implementation of memory/normalize.h: per-code-point NFKC -> NFD -> strip Mn -> lowercase for the covered
// ranges (equivalent to the whole-string chain there, since the stripped marks are exactly what composition
// would have attached), then whitespace collapse and trim as Engram's normalizer does.
#include "memory/normalize.h"

#include <unordered_map>

#include "core/error.h"

namespace pg {
namespace {

// Base letters of U+00C0..U+017F after NFD + strip accents ('.' = no decomposition).
constexpr const char* kLatinBase =
    "AAAAAA.CEEEEIIII.NOOOOO..UUUUY.."  // C0-DF
    "aaaaaa.ceeeeiiii.nooooo..uuuuy.y"  // E0-FF
    "AaAaAaCcCcCcCcDd..EeEeEeEeEeGgGg"  // 100-11F
    "GgGgHh..IiIiIiIiI...JjKk.LlLlLl."  // 120-13F
    "...NnNnNn...OoOoOo..RrRrRrSsSsSs"  // 140-15F
    "SsTtTt..UuUuUuUuUuUuWwYyYZzZzZz.";  // 160-17F

bool decode_utf8(const std::string& s, std::u32string& out) {
  out.clear();
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    char32_t cp;
    int extra;
    if (c < 0x80) cp = c, extra = 0;
    else if ((c & 0xE0) == 0xC0) cp = c & 0x1F, extra = 1;
    else if ((c & 0xF0) == 0xE0) cp = c & 0x0F, extra = 2;
    else if ((c & 0xF8) == 0xF0) cp = c & 0x07, extra = 3;
    else return false;
    if (extra > 0 && i + static_cast<size_t>(extra) >= s.size()) return false;
    for (int k = 1; k <= extra; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr char32_t kMin[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    out.push_back(cp);
    i += 1 + extra;
  }
  return true;
}

void encode_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_nonspacing_mark(char32_t c) {
  return (c >= 0x0300 && c <= 0x036F) || (c >= 0x1AB0 && c <= 0x1AFF) || (c >= 0x1DC0 && c <= 0x1DFF) ||
         (c >= 0x20D0 && c <= 0x20FF) || (c >= 0xFE20 && c <= 0xFE2F) || c == 0x3099 || c == 0x309A;
}

// Rust's char::is_whitespace (what the normalizer's Strip trims).
bool is_unicode_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// NFKC compatibility (and canonical singleton) mappings of the covered ranges; empty when none applies.
std::u32string compat(char32_t c) {
  if (c >= 0xFF01 && c <= 0xFF5E) return std::u32string(1, c - 0xFEE0);
  if ((c >= 0x2000 && c <= 0x200A) || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xA0) return U" ";
  switch (c) {
    case 0xA8:
      return U" \u0308";
    case 0xAA:
      return U"a";
    case 0xAF:
      return U" \u0304";
    case 0xB2:
      return U"2";
    case 0xB3:
      return U"3";
    case 0xB4:
      return U" \u0301";
    case 0xB5:
      return U"\u03BC";
    case 0xB8:
      return U" \u0327";
    case 0xB9:
      return U"1";
    case 0xBA:
      return U"o";
    case 0xBC:
      return U"1\u20444";
    case 0xBD:
      return U"1\u20442";
    case 0xBE:
      return U"3\u20444";
    case 0x132:
      return U"IJ";
    case 0x133:
      return U"ij";
    case 0x13F:
      return U"L\u00B7";
    case 0x140:
      return U"l\u00B7";
    case 0x149:
      return U"\u02BCn";
    case 0x17F:
      return U"s";
    case 0x37E:
      return U";";
    case 0x387:
      return U"\u00B7";
    case 0x2011:
      return U"\u2010";
    case 0x2024:
      return U".";
    case 0x2025:
      return U"..";
    case 0x2026:
      return U"...";
    case 0x2122:
      return U"TM";
    case 0xFB00:
      return U"ff";
    case 0xFB01:
      return U"fi";
    case 0xFB02:
      return U"fl";
    case 0xFB03:
      return U"ffi";
    case 0xFB04:
      return U"ffl";
    case 0xFB05:
      return U"st";
    case 0xFB06:
      return U"st";
    default:
      return U"";
  }
}

// Canonical decomposition followed by stripping the marks: the base character (itself when none).
char32_t strip_accents(char32_t c) {
  if (c >= 0xC0 && c <= 0x17F) {
    const char b = kLatinBase[c - 0xC0];
    return b == '.' ? c : static_cast<char32_t>(b);
  }
  static const std::unordered_map<char32_t, char32_t> kTable = {// Greek tonos / dialytika
                                                                {0x386, 0x391},
                                                                {0x388, 0x395},
                                                                {0x389, 0x397},
                                                                {0x38A, 0x399},
                                                                {0x38C, 0x39F},
                                                                {0x38E, 0x3A5},
                                                                {0x38F, 0x3A9},
                                                                {0x390, 0x3B9},
                                                                {0x3AA, 0x399},
                                                                {0x3AB, 0x3A5},
                                                                {0x3AC, 0x3B1},
                                                                {0x3AD, 0x3B5},
                                                                {0x3AE, 0x3B7},
                                                                {0x3AF, 0x3B9},
                                                                {0x3B0, 0x3C5},
                                                                {0x3CA, 0x3B9},
                                                                {0x3CB, 0x3C5},
                                                                {0x3CC, 0x3BF},
                                                                {0x3CD, 0x3C5},
                                                                {0x3CE, 0x3C9},
                                                                // Cyrillic
                                                                {0x400, 0x415},
                                                                {0x401, 0x415},
                                                                {0x403, 0x413},
                                                                {0x407, 0x406},
                                                                {0x40C, 0x41A},
                                                                {0x40D, 0x418},
                                                                {0x40E, 0x423},
                                                                {0x419, 0x418},
                                                                {0x439, 0x438},
                                                                {0x450, 0x435},
                                                                {0x451, 0x435},
                                                                {0x453, 0x433},
                                                                {0x457, 0x456},
                                                                {0x45C, 0x43A},
                                                                {0x45D, 0x438},
                                                                {0x45E, 0x443},
                                                                // Kana: voiced / semi-voiced to the plain kana
                                                                {0x3094, 0x3046},
                                                                {0x309E, 0x309D},
                                                                {0x30F4, 0x30A6},
                                                                {0x30F7, 0x30EF},
                                                                {0x30F8, 0x30F0},
                                                                {0x30F9, 0x30F1},
                                                                {0x30FA, 0x30F2},
                                                                {0x30FE, 0x30FD}};
  // Hiragana / Katakana voiced rows (the katakana block is the hiragana block + 0x60).
  for (char32_t off : {char32_t{0}, char32_t{0x60}}) {
    const char32_t h = c - off;
    if (h >= 0x304C && h <= 0x3062 && (h % 2 == 0)) return c - 1;
    if (h == 0x3065 || h == 0x3067 || h == 0x3069) return c - 1;
    if (h >= 0x3070 && h <= 0x307D) {
      const char32_t k = (h - 0x306F) % 3;  // 0 plain, 1 voiced, 2 semi-voiced
      return c - k;
    }
  }
  auto it = kTable.find(c);
  return it == kTable.end() ? c : it->second;
}

char32_t lowercase(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c >= 0x100 && c <= 0x137) return c | 1;
  if (c >= 0x139 && c <= 0x148) return (c % 2 == 1) ? c + 1 : c;
  if (c >= 0x14A && c <= 0x177) return c | 1;
  if (c == 0x178) return 0xFF;
  if (c >= 0x179 && c <= 0x17E) return (c % 2 == 1) ? c + 1 : c;
  if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

void map_codepoint(char32_t c, std::u32string& out, int depth) {
  if (depth < 2) {
    std::u32string m = compat(c);
    if (!m.empty()) {
      for (char32_t x : m) map_codepoint(x, out, depth + 1);
      return;
    }
  }
  if (is_nonspacing_mark(c)) return;
  out.push_back(lowercase(strip_accents(c)));
}

}  // namespace

std::string engram_normalize(const std::string& text) {
  std::u32string cps;
  if (!decode_utf8(text, cps)) return text;
  std::u32string mapped;
  for (char32_t c : cps) map_codepoint(c, mapped, 0);
  // Replace(Regex("[ \t\r\n]+"), " ")
  std::u32string collapsed;
  for (char32_t c : mapped) {
    const bool ws = c == ' ' || c == '\t' || c == '\r' || c == '\n';
    if (ws) {
      if (collapsed.empty() || collapsed.back() != ' ') collapsed.push_back(' ');
    } else {
      collapsed.push_back(c);
    }
  }
  // A lone space is kept (Engram's sentinel); otherwise Strip() trims Unicode whitespace on both sides.
  if (collapsed != U" ") {
    size_t b = 0, e = collapsed.size();
    while (b < e && is_unicode_space(collapsed[b])) ++b;
    while (e > b && is_unicode_space(collapsed[e - 1])) --e;
    collapsed = collapsed.substr(b, e - b);
  }
  std::string out;
  for (char32_t c : collapsed) encode_utf8(c, out);
  return out;
}

CompressedVocab compress_vocabulary(const std::vector<std::string>& texts, const std::vector<std::string>& pieces) {
  CompressedVocab v;
  v.map.resize(texts.size());
  std::unordered_map<std::string, uint32_t> ids;
  std::u32string scratch;
  for (size_t t = 0; t < texts.size(); ++t) {
    const std::string& text = texts[t];
    const bool bad = text.find("\xEF\xBF\xBD") != std::string::npos || !decode_utf8(text, scratch);
    std::string key;
    if (bad) {
      key = t < pieces.size() ? pieces[t] : text;
    } else {
      key = engram_normalize(text);
      if (key.empty()) key = text;
    }
    auto [it, inserted] = ids.emplace(key, v.size);
    if (inserted) ++v.size;
    v.map[t] = it->second;
  }
  return v;
}

std::vector<std::string> sentencepiece_piece_texts(const std::vector<std::string>& pieces) {
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (const std::string& p : pieces) {
    if (p.size() == 6 && p.compare(0, 3, "<0x") == 0 && p[5] == '>') {
      const int hi = std::stoi(p.substr(3, 2), nullptr, 16);
      if (hi >= 0x80) {
        out.push_back("\xEF\xBF\xBD");
        continue;
      }
      out.push_back(std::string(1, static_cast<char>(hi)));
      continue;
    }
    std::string s;
    for (size_t i = 0; i < p.size();) {
      if (p.compare(i, 3, "\xE2\x96\x81") == 0) {  // U+2581
        s.push_back(' ');
        i += 3;
      } else {
        s.push_back(p[i++]);
      }
    }
    out.push_back(s);
  }
  return out;
}

std::unique_ptr<CompressedVocab> engram_vocab(const MemoryConfig& m, const std::vector<std::string>& pieces) {
  if (!(m.layout == "engram" && m.hash.engram_faithful)) return nullptr;
  if (pieces.empty())
    throw ConfigError("memory.hash.engram_faithful needs the tokenizer's pieces (hint: build the data first)");
  return std::make_unique<CompressedVocab>(compress_vocabulary(sentencepiece_piece_texts(pieces), pieces));
}

}  // namespace pg
