// str_cat: concatenates any streamable values into a std::string (GCC 12 has no <format>).
#pragma once

#include <sstream>
#include <string>

namespace mindspeed {

template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

}  // namespace mindspeed
