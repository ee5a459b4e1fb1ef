// A small JSON value and a serializer that reproduces Python's json.dumps(obj, indent=4)
// byte for byte (ensure_ascii escapes, float repr, ", " / ": " separators). Megatron hashes
// that text to name its index cache files (megatron_dataset.py, blended_dataset.py), so the
// same text gives the same MD5 and lets us share a cache directory with Megatron.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace mindspeed {

class PyJson {
 public:
  using List = std::vector<PyJson>;
  using Object = std::vector<std::pair<std::string, PyJson>>;  // insertion order (OrderedDict)

  PyJson() : value_(std::monostate{}) {}  // None -> null
  static PyJson null() { return PyJson(); }
  static PyJson boolean(bool b) { return PyJson(Value(b)); }
  static PyJson integer(int64_t v) { return PyJson(Value(v)); }
  static PyJson floating(double v) { return PyJson(Value(v)); }
  static PyJson string(std::string s) { return PyJson(Value(std::move(s))); }
  static PyJson list(List items = {}) { return PyJson(Value(std::move(items))); }
  static PyJson object(Object items = {}) { return PyJson(Value(std::move(items))); }

  /// Appends to a list / object value (must already be one).
  PyJson& push_back(PyJson v);
  PyJson& set(std::string key, PyJson v);

  /// json.dumps(self, indent=indent)
  std::string dumps(int indent = 4) const;

 private:
  using Value = std::variant<std::monostate, bool, int64_t, double, std::string, List, Object>;
  explicit PyJson(Value v) : value_(std::move(v)) {}
  void dump_to(std::string& out, int indent, int level) const;

  Value value_;
};

/// Python's repr(float): shortest round-trip digits, exponent form when the exponent is
/// < -4 or >= 16 ("1e-05", "1e+16"), otherwise positional with at least one decimal ("1.0").
std::string python_float_repr(double v);

/// A JSON string literal as json.dumps writes it with ensure_ascii=True. Bytes that are not
/// valid UTF-8 become \udcXX, as Python's surrogateescape decoding of argv/paths does.
std::string python_json_quote(const std::string& s);

}  // namespace mindspeed
