// NFC normalisation (see unicode_normalization.h).
#include "tokenizer/unicode_normalization.h"

#include <algorithm>
#include <iterator>
#include <vector>

#include "tokenizer/unicode.h"

namespace mindspeed {
namespace {

struct CombiningClassRange {
  char32_t first;
  char32_t last;
  uint8_t ccc;
};
struct Decomposition {
  char32_t cp;
  uint8_t length;
  char32_t parts[4];
};
struct Composition {
  char32_t first;
  char32_t second;
  char32_t composite;
};

constexpr CombiningClassRange kCombiningClasses[] = {
#define MS_NFC_COMBINING_CLASSES
#include "tokenizer/unicode_nfc_tables.inc"
#undef MS_NFC_COMBINING_CLASSES
};
constexpr Decomposition kDecompositions[] = {
#define MS_NFC_DECOMPOSITIONS
#include "tokenizer/unicode_nfc_tables.inc"
#undef MS_NFC_DECOMPOSITIONS
};
constexpr Composition kCompositions[] = {
#define MS_NFC_COMPOSITIONS
#include "tokenizer/unicode_nfc_tables.inc"
#undef MS_NFC_COMPOSITIONS
};

// Hangul syllable arithmetic (Unicode 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr char32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

void decompose(char32_t cp, std::vector<char32_t>* out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  const Decomposition* it = std::lower_bound(
      std::begin(kDecompositions), std::end(kDecompositions), cp,
      [](const Decomposition& d, char32_t value) { return d.cp < value; });
  if (it != std::end(kDecompositions) && it->cp == cp) {
    out->insert(out->end(), it->parts, it->parts + it->length);
  } else {
    out->push_back(cp);
  }
}

// The primary composite of (first, second), or 0.
char32_t compose(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 &&
      second > kTBase && second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  const Composition* it = std::lower_bound(
      std::begin(kCompositions), std::end(kCompositions), std::pair(first, second),
      [](const Composition& c, const std::pair<char32_t, char32_t>& value) {
        return c.first != value.first ? c.first < value.first : c.second < value.second;
      });
  if (it != std::end(kCompositions) && it->first == first && it->second == second) {
    return it->composite;
  }
  return 0;
}

}  // namespace

uint8_t canonical_combining_class(char32_t cp) {
  if (cp < 0x300) return 0;
  const CombiningClassRange* it = std::upper_bound(
      std::begin(kCombiningClasses), std::end(kCombiningClasses), cp,
      [](char32_t value, const CombiningClassRange& r) { return value < r.first; });
  if (it == std::begin(kCombiningClasses)) return 0;
  --it;
  return cp <= it->last ? it->ccc : 0;
}

std::string nfc_normalize(std::string_view utf8) {
  // Fast path: nothing below U+0300 decomposes under NFC or combines with anything.
  bool simple = true;
  for (size_t pos = 0; pos < utf8.size() && simple;) {
    const uint8_t byte = static_cast<uint8_t>(utf8[pos]);
    if (byte < 0x80) {
      ++pos;
      continue;
    }
    char32_t cp;
    int bad_len;
    const int len = decode_utf8(utf8, pos, &cp, &bad_len);
    if (len == 0 || cp >= 0x300) simple = false;
    pos += len;
  }
  if (simple) return std::string(utf8);

  // 1. Canonical decomposition. Callers pass validated UTF-8; an ill-formed byte (which
  //    they never pass) would become U+FFFD rather than be guessed at.
  std::vector<char32_t> cps;
  cps.reserve(utf8.size());
  for (size_t pos = 0; pos < utf8.size();) {
    char32_t cp;
    int bad_len;
    const int len = decode_utf8(utf8, pos, &cp, &bad_len);
    if (len == 0) {
      cp = 0xFFFD;
      pos += bad_len;
    } else {
      pos += len;
    }
    decompose(cp, &cps);
  }
  // 2. Canonical ordering: each run of non-starters sorted (stably) by combining class.
  for (size_t i = 0; i < cps.size();) {
    if (canonical_combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && canonical_combining_class(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + static_cast<std::ptrdiff_t>(i),
                     cps.begin() + static_cast<std::ptrdiff_t>(j), [](char32_t a, char32_t b) {
                       return canonical_combining_class(a) < canonical_combining_class(b);
                     });
    i = j;
  }
  // 3. Canonical composition (UAX #15's reference algorithm): a character joins the last
  //    starter when nothing between them blocks it (no intervening character of the same
  //    or a higher combining class, or an intervening starter).
  if (!cps.empty()) {
    size_t starter = 0;
    int last_class = canonical_combining_class(cps[0]);
    if (last_class != 0) last_class = 256;  // a leading non-starter never composes
    size_t kept = 1;
    for (size_t i = 1; i < cps.size(); ++i) {
      const char32_t cp = cps[i];
      const int cls = canonical_combining_class(cp);
      const char32_t composite = compose(cps[starter], cp);
      if (composite != 0 && (last_class < cls || last_class == 0)) {
        cps[starter] = composite;
        continue;
      }
      if (cls == 0) starter = kept;
      last_class = cls;
      cps[kept++] = cp;
    }
    cps.resize(kept);
  }
  std::string out;
  out.reserve(utf8.size());
  for (char32_t cp : cps) append_utf8(cp, &out);
  return out;
}

}  // namespace mindspeed
