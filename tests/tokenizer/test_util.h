// Helpers shared by the tokenizer tests: reading JSONL vectors and scratch files.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scratch_dir.h"

namespace mindspeed::testing {

inline std::string source_path(const std::string& relative) {
  return std::string(MS_SOURCE_DIR) + "/" + relative;
}

inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}


}  // namespace mindspeed::testing
