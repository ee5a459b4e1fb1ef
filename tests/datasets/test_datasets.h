// Shared fixtures of the dataset tests: the reference vectors written by
// reference/generate_reference_vectors.py, an in-memory LowLevelDataset with the same
// content as the Python model's SyntheticLowLevelDataset, and small helpers.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "datasets/low_level_dataset.h"
#include "datasets/md5.h"

namespace mindspeed::testing {

/// "key v1 v2 ..." lines of a reference file.
class ReferenceVectors {
 public:
  explicit ReferenceVectors(const std::string& file) {
    std::ifstream in(std::string(MS_SOURCE_DIR) + "/tests/datasets/reference/" + file);
    EXPECT_TRUE(in.good()) << "missing reference file " << file;
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream ss(line);
      std::string key, v;
      ss >> key;
      std::vector<std::string> values;
      while (ss >> v) values.push_back(v);
      entries_[key] = std::move(values);
    }
  }
  bool has(const std::string& key) const { return entries_.count(key) != 0; }
  const std::vector<std::string>& strings(const std::string& key) const {
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      ADD_FAILURE() << "no reference entry " << key;
      static const std::vector<std::string> empty;
      return empty;
    }
    return it->second;
  }
  const std::string& str(const std::string& key, size_t i = 0) const { return strings(key).at(i); }
  std::vector<int64_t> ints(const std::string& key) const {
    std::vector<int64_t> out;
    for (const auto& s : strings(key)) out.push_back(static_cast<int64_t>(std::stoll(s)));
    return out;
  }
  std::vector<uint64_t> uints(const std::string& key) const {
    std::vector<uint64_t> out;
    for (const auto& s : strings(key)) out.push_back(std::stoull(s));
    return out;
  }
  std::vector<double> doubles(const std::string& key) const {
    std::vector<double> out;
    for (const auto& s : strings(key)) out.push_back(std::strtod(s.c_str(), nullptr));
    return out;
  }

  static const ReferenceVectors& gpt() {
    static const ReferenceVectors v("gpt_dataset_vectors.txt");
    return v;
  }
  static const ReferenceVectors& numpy_random() {
    static const ReferenceVectors v("numpy_random_vectors.txt");
    return v;
  }

 private:
  std::map<std::string, std::vector<std::string>> entries_;
};

/// "md5:<hex>" of an array's little-endian bytes, as the generator writes it.
template <typename T>
std::string md5_tag(const T* data, int64_t n) {
  return "md5:" + md5_hex(std::string_view(reinterpret_cast<const char*>(data),
                                           static_cast<size_t>(n) * sizeof(T)));
}

/// Sequence i has lengths[i] tokens: token k = 1 + (i * 7919 + k * 31) % 997, the last = eod.
class SyntheticLowLevelDataset : public LowLevelDataset {
 public:
  SyntheticLowLevelDataset(std::vector<int32_t> lengths, int32_t eod, std::string prefix)
      : lengths_(std::move(lengths)), eod_(eod), prefix_(std::move(prefix)) {}
  int64_t num_sequences() const override { return static_cast<int64_t>(lengths_.size()); }
  int32_t sequence_length(int64_t i) const override { return lengths_.at(static_cast<size_t>(i)); }
  Status get(int64_t i, int64_t offset, int64_t length, int32_t* out) const override {
    const int64_t n = sequence_length(i);
    EXPECT_TRUE(offset >= 0 && length >= 0 && offset + length <= n)
        << "read [" << offset << ", " << offset + length << ") of sequence " << i << " (" << n << ")";
    ++reads_;
    for (int64_t k = 0; k < length; ++k) {
      const int64_t pos = offset + k;
      out[k] = pos == n - 1 ? eod_ : static_cast<int32_t>(1 + (i * 7919 + pos * 31) % 997);
    }
    return ok_status();
  }
  std::string path_prefix() const override { return prefix_; }
  int64_t reads() const { return reads_; }

 private:
  std::vector<int32_t> lengths_;
  int32_t eod_;
  std::string prefix_;
  mutable int64_t reads_ = 0;
};

inline std::shared_ptr<SyntheticLowLevelDataset> synthetic(const std::string& which,
                                                           const std::string& prefix) {
  std::vector<int32_t> lengths;
  for (int64_t v : ReferenceVectors::gpt().ints(which + "_lengths")) lengths.push_back(static_cast<int32_t>(v));
  return std::make_shared<SyntheticLowLevelDataset>(std::move(lengths), /*eod=*/0, prefix);
}

/// A fresh empty folder under /tmp, removed at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ms_datasets_XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace mindspeed::testing
