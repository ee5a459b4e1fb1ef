// UTF-8 decoding, code-point classes and the byte-level tables (see unicode.h).
#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <ios>
#include <iterator>

namespace mindspeed {
namespace {

struct CodePointRange {
  char32_t first;
  char32_t last;
  CharClass cls;
};

constexpr CodePointRange kRanges[] = {
#include "tokenizer/unicode_tables.inc"
};

struct WordRange {
  char32_t first;
  char32_t last;
};

constexpr WordRange kWordRanges[] = {
#include "tokenizer/unicode_word_tables.inc"
};

// ASCII is by far the most common input: classify it with one table lookup.
constexpr std::array<CharClass, 128> make_ascii_table() {
  std::array<CharClass, 128> table{};
  for (const CodePointRange& range : kRanges) {
    for (char32_t cp = range.first; cp <= range.last && cp < 128; ++cp) table[cp] = range.cls;
  }
  return table;
}
constexpr std::array<CharClass, 128> kAsciiTable = make_ascii_table();

}  // namespace

const std::array<CharClass, 128> kAsciiCharClasses = kAsciiTable;

CharClass char_class(char32_t cp) {
  if (cp < 128) return kAsciiTable[cp];
  // The last range whose first code point is <= cp.
  const CodePointRange* it =
      std::upper_bound(std::begin(kRanges), std::end(kRanges), cp,
                       [](char32_t value, const CodePointRange& r) { return value < r.first; });
  if (it == std::begin(kRanges)) return CharClass::kOther;
  --it;
  return cp <= it->last ? it->cls : CharClass::kOther;
}

bool is_word_char(char32_t cp) {
  if (cp < 128) {
    return (cp >= '0' && cp <= '9') || (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z') || cp == '_';
  }
  const WordRange* it =
      std::upper_bound(std::begin(kWordRanges), std::end(kWordRanges), cp,
                       [](char32_t value, const WordRange& r) { return value < r.first; });
  if (it == std::begin(kWordRanges)) return false;
  --it;
  return cp <= it->last;
}

int decode_utf8(std::string_view s, size_t pos, char32_t* cp, int* bad_len) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t b0 = byte(pos);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  int len;
  char32_t value;
  // Allowed range of the second byte (Unicode Table 3-7, well-formed byte sequences).
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
    value = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    value = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    value = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;  // no overlong forms
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    *bad_len = 1;  // continuation byte, C0, C1 or F5..FF
    return 0;
  }
  for (int k = 1; k < len; ++k) {
    if (pos + k >= s.size()) {
      *bad_len = k;
      return 0;
    }
    const uint8_t b = byte(pos + k);
    const uint8_t min = k == 1 ? lo : 0x80;
    const uint8_t max = k == 1 ? hi : 0xBF;
    if (b < min || b > max) {
      *bad_len = k;
      return 0;
    }
    value = (value << 6) | (b & 0x3F);
  }
  *cp = value;
  return len;
}

size_t find_invalid_utf8(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    if (static_cast<uint8_t>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    char32_t cp;
    int bad_len;
    const int len = decode_utf8(s, pos, &cp, &bad_len);
    if (len == 0) return pos;
    pos += len;
  }
  return std::string_view::npos;
}

void append_utf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

struct ByteLevelTables {
  std::array<char32_t, 256> symbol_of_byte{};
  std::array<int16_t, 324> byte_of_symbol{};  // all symbols are below U+0144
};

constexpr ByteLevelTables make_byte_level_tables() {
  ByteLevelTables t;
  for (int16_t& b : t.byte_of_symbol) b = -1;
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable =
        (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    t.symbol_of_byte[b] = printable ? static_cast<char32_t>(b) : next++;
    t.byte_of_symbol[t.symbol_of_byte[b]] = static_cast<int16_t>(b);
  }
  return t;
}
constexpr ByteLevelTables kByteLevel = make_byte_level_tables();

}  // namespace

char32_t byte_level_symbol(uint8_t byte) { return kByteLevel.symbol_of_byte[byte]; }

int byte_level_byte(char32_t symbol) {
  return symbol < kByteLevel.byte_of_symbol.size() ? kByteLevel.byte_of_symbol[symbol] : -1;
}

std::string utf8_decode_replace(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    char32_t cp;
    int bad_len;
    const int len = decode_utf8(bytes, pos, &cp, &bad_len);
    if (len > 0) {
      out.append(bytes.substr(pos, len));
      pos += len;
    } else {
      append_utf8(0xFFFD, &out);
      pos += bad_len;
    }
  }
  return out;
}

Status decode_code_points(std::string_view text, std::vector<CodePoint>* cps) {
  if (text.size() > UINT32_MAX) {
    return invalid_argument("text of ", text.size(), " bytes is too long to tokenise (max 4 GiB)");
  }
  cps->clear();
  size_t pos = 0;
  while (pos < text.size()) {
    const uint8_t byte = static_cast<uint8_t>(text[pos]);
    if (byte < 0x80) {  // ASCII fast path
      cps->push_back(CodePoint{byte, kAsciiCharClasses[byte], static_cast<uint32_t>(pos)});
      ++pos;
      continue;
    }
    char32_t cp;
    int bad_len;
    const int len = decode_utf8(text, pos, &cp, &bad_len);
    if (len == 0) {
      return invalid_argument("text is not valid UTF-8 (ill-formed byte 0x", std::hex, static_cast<int>(byte), std::dec,
                              " at byte offset ", pos, ")");
    }
    cps->push_back(CodePoint{cp, char_class(cp), static_cast<uint32_t>(pos)});
    pos += len;
  }
  return ok_status();
}

}  // namespace mindspeed
