// Python-compatible JSON text (see the header).
#include "datasets/python_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/check.h"

namespace mindspeed {

PyJson& PyJson::push_back(PyJson v) {
  auto* list = std::get_if<List>(&value_);
  MS_CHECK(list != nullptr, "PyJson::push_back on a non-list");
  list->push_back(std::move(v));
  return *this;
}

PyJson& PyJson::set(std::string key, PyJson v) {
  auto* obj = std::get_if<Object>(&value_);
  MS_CHECK(obj != nullptr, "PyJson::set on a non-object");
  for (auto& [k, existing] : *obj) {
    if (k == key) {
      existing = std::move(v);
      return *this;
    }
  }
  obj->emplace_back(std::move(key), std::move(v));
  return *this;
}

std::string python_float_repr(double v) {
  if (std::isnan(v)) return "NaN";  // json.dumps spelling of the specials
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  // Shortest round-trip digits in scientific form "d.ddde[+-]x".
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  // to_chars writes "[-]d[.ddd]e[+-]xx": the exponent is read with from_chars (std::stoi
  // throws); anything else is a bug.
  const char* exp_mark = std::find(buf, res.ptr, 'e');
  MS_CHECK(exp_mark + 2 < res.ptr, "to_chars wrote '", std::string(buf, res.ptr), "'");
  int exp10 = 0;
  const auto exp_read = std::from_chars(exp_mark + (exp_mark[1] == '+' ? 2 : 1), res.ptr, exp10);
  MS_CHECK(exp_read.ec == std::errc() && exp_read.ptr == res.ptr, "to_chars wrote '", std::string(buf, res.ptr), "'");
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  const int nd = static_cast<int>(digits.size());
  std::string out = sign;
  if (decpt <= -4 || decpt > 16) {
    out += digits.substr(0, 1);
    if (nd > 1) {
      out += '.';
      out.append(digits, 1);
    }
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += ebuf;
  } else if (decpt <= 0) {
    out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
  } else if (decpt >= nd) {
    out += digits + std::string(static_cast<size_t>(decpt - nd), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
  }
  return out;
}

namespace {

void append_u_escape(std::string& out, uint32_t unit) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "\\u%04x", unit);
  out += buf;
}

}  // namespace

std::string python_json_quote(const std::string& s) {
  std::string out = "\"";
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20 || c == 0x7f) {
            append_u_escape(out, c);
          } else {
            out.push_back(static_cast<char>(c));
          }
      }
      ++i;
      continue;
    }
    // Decode one UTF-8 sequence (strictly: no overlongs, no surrogates, <= U+10FFFF).
    int len = 0;
    uint32_t cp = 0;
    uint32_t min_cp = 0;
    if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f, min_cp = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f, min_cp = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07, min_cp = 0x10000;
    }
    bool valid = len > 0 && i + static_cast<size_t>(len) <= n;
    for (int k = 1; valid && k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) valid = false;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    if (valid && (cp < min_cp || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))) valid = false;
    if (!valid) {
      append_u_escape(out, 0xdc00u + c);  // surrogateescape
      ++i;
      continue;
    }
    if (cp >= 0x10000) {
      const uint32_t v = cp - 0x10000;
      append_u_escape(out, 0xd800u + (v >> 10));
      append_u_escape(out, 0xdc00u + (v & 0x3ff));
    } else {
      append_u_escape(out, cp);
    }
    i += static_cast<size_t>(len);
  }
  out += "\"";
  return out;
}

void PyJson::dump_to(std::string& out, int indent, int level) const {
  const std::string pad_inner(static_cast<size_t>(indent * (level + 1)), ' ');
  const std::string pad_outer(static_cast<size_t>(indent * level), ' ');
  if (std::holds_alternative<std::monostate>(value_)) {
    out += "null";
  } else if (const bool* b = std::get_if<bool>(&value_)) {
    out += *b ? "true" : "false";
  } else if (const int64_t* i = std::get_if<int64_t>(&value_)) {
    out += std::to_string(*i);
  } else if (const double* d = std::get_if<double>(&value_)) {
    out += python_float_repr(*d);
  } else if (const std::string* s = std::get_if<std::string>(&value_)) {
    out += python_json_quote(*s);
  } else if (const List* list = std::get_if<List>(&value_)) {
    if (list->empty()) {
      out += "[]";
      return;
    }
    out += "[\n";
    for (size_t k = 0; k < list->size(); ++k) {
      out += pad_inner;
      (*list)[k].dump_to(out, indent, level + 1);
      out += k + 1 < list->size() ? ",\n" : "\n";
    }
    out += pad_outer + "]";
  } else {
    const Object* obj_ptr = std::get_if<Object>(&value_);
    MS_CHECK(obj_ptr != nullptr, "PyJson holds no known alternative");
    const Object& obj = *obj_ptr;
    if (obj.empty()) {
      out += "{}";
      return;
    }
    out += "{\n";
    for (size_t k = 0; k < obj.size(); ++k) {
      out += pad_inner + python_json_quote(obj[k].first) + ": ";
      obj[k].second.dump_to(out, indent, level + 1);
      out += k + 1 < obj.size() ? ",\n" : "\n";
    }
    out += pad_outer + "}";
  }
}

std::string PyJson::dumps(int indent) const {
  std::string out;
  dump_to(out, indent, 0);
  return out;
}

}  // namespace mindspeed
