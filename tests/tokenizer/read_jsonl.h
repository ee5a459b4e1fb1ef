// testing::read_jsonl: the JSON values of a JSONL file (the committed reference vectors),
// one per non-empty line. Its own header so that tests which take their other helpers from
// tests/tools/tools_test_util.h (hf_preprocess_data_test) can include it too; test_util.h
// includes it for the tokenizer tests.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mindspeed::testing {

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
