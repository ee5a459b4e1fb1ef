// Non-throwing JSON input for library code. nlohmann::json reports errors by throwing, and
// mindspeed lets no exception escape (status.h), so JSON read from files is parsed here and
// then read with explicit type checks (is_number_integer() before get<int64_t>(), find()
// instead of at()); callers turn the error text into a Status naming the file and field.
// Header-only: included by the .cpp files of the library that read JSON.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace mindspeed {
namespace json_internal {

// A SAX consumer that builds nothing and records the first syntax error (nlohmann's text,
// with the line and column). Used only to describe a document the DOM parser refused.
class SyntaxErrorRecorder final : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& ex) override {
    if (message.empty()) message = ex.what();
    return false;
  }

  std::string message;
};

}  // namespace json_internal

/// Parses `text` without throwing. On a syntax error returns nullopt and stores in *error
/// nlohmann's description, e.g. "parse error at line 1, column 9: syntax error while parsing
/// object - unexpected end of input; expected '}'".
inline std::optional<nlohmann::json> try_parse_json(std::string_view text, std::string* error) {
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) return j;
  // Error path only: parse again with a consumer that keeps the message (the DOM parser
  // without exceptions drops it).
  json_internal::SyntaxErrorRecorder recorder;
  nlohmann::json::sax_parse(text.begin(), text.end(), &recorder);
  std::string message = recorder.message.empty() ? "syntax error" : recorder.message;
  // Drop the "[json.exception.parse_error.101] " prefix.
  if (message.starts_with("[json.exception.")) {
    const size_t end = message.find("] ");
    if (end != std::string::npos) message.erase(0, end + 2);
  }
  *error = message;
  return std::nullopt;
}

namespace json_internal {

// Appends the compact text of `v` (as dump() writes it) until `out` holds more than `limit`
// characters; containers nested deeper than `depth` print as [...] or {...}. dump() itself
// recurses once per nesting level, so a value 100000 arrays deep overflowed the stack.
inline void append_bounded(const nlohmann::json& v, size_t limit, int depth, std::string* out) {
  constexpr auto kReplace = nlohmann::json::error_handler_t::replace;
  if (out->size() > limit) return;
  if (v.is_array() || v.is_object()) {
    const bool array = v.is_array();
    if (depth == 0) {
      out->append(array ? "[...]" : "{...}");
      return;
    }
    out->push_back(array ? '[' : '{');
    for (auto it = v.begin(); it != v.end() && out->size() <= limit; ++it) {
      if (it != v.begin()) out->push_back(',');
      if (!array) {
        out->append(nlohmann::json(it.key()).dump(-1, ' ', false, kReplace));
        out->push_back(':');
      }
      append_bounded(*it, limit, depth - 1, out);
    }
    out->push_back(array ? ']' : '}');
  } else if (v.is_string()) {
    const std::string& text = v.get_ref<const std::string&>();
    out->append(nlohmann::json(text.substr(0, limit + 1)).dump(-1, ' ', false, kReplace));
  } else {
    out->append(v.dump(-1, ' ', false, kReplace));
  }
}

}  // namespace json_internal

/// A JSON value for messages: its type and (up to `max_chars` of) its text, e.g.
/// `string "64"`, `number 0`, `null`. Never throws (invalid UTF-8 is replaced); time and stack
/// depth stay bounded whatever the value's size and nesting.
inline std::string describe_json_value(const nlohmann::json& v, size_t max_chars = 60) {
  if (v.is_null()) return "null";
  std::string text;
  json_internal::append_bounded(v, max_chars, 16, &text);
  if (text.size() > max_chars) text = text.substr(0, max_chars) + "...";
  const char* type = v.is_boolean() ? "boolean" : v.is_number() ? "number" : v.type_name();
  return std::string(type) + " " + text;
}

}  // namespace mindspeed
