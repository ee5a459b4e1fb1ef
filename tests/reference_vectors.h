// Reader of the vector files the reference generators write (tests/*/reference/*_vectors.txt):
// '#' comment lines, then per case a line "case NAME key=value ..." (a bare key has the value
// ""), its rows (whitespace-separated words), and "end". Each test turns the words into its
// own types.
#pragma once

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace mindspeed::testing {

struct ReferenceCase {
  std::map<std::string, std::string> args;     ///< key=value of the "case" line
  std::vector<std::vector<std::string>> rows;  ///< the lines up to "end", split into words
};

/// The cases of `path` (relative to the source tree), by name; empty when the file is missing.
inline std::map<std::string, ReferenceCase> read_reference_cases(const std::string& path) {
  std::map<std::string, ReferenceCase> out;
  std::ifstream in(std::string(MS_SOURCE_DIR) + "/" + path);
  std::string line, current;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::vector<std::string> row;
    for (std::string w; words >> w;) row.push_back(w);
    if (row.empty()) continue;
    if (row[0] == "case" && row.size() >= 2) {
      current = row[1];
      ReferenceCase& c = out[current];
      for (size_t i = 2; i < row.size(); ++i) {
        const size_t eq = row[i].find('=');
        c.args[row[i].substr(0, eq)] = eq == std::string::npos ? "" : row[i].substr(eq + 1);
      }
    } else if (row[0] == "end") {
      current.clear();
    } else {
      out[current].rows.push_back(std::move(row));
    }
  }
  return out;
}

}  // namespace mindspeed::testing
