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

/// A JSON value for messages: its type and (up to `max_chars` of) its text, e.g.
/// `string "64"`, `number 0`, `null`. Never throws (invalid UTF-8 is replaced).
inline std::string describe_json_value(const nlohmann::json& v, size_t max_chars = 60) {
  if (v.is_null()) return "null";
  std::string text = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > max_chars) text = text.substr(0, max_chars) + "...";
  const char* type = v.is_boolean() ? "boolean" : v.is_number() ? "number" : v.type_name();
  return std::string(type) + " " + text;
}

}  // namespace mindspeed
