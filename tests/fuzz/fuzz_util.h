// Helpers shared by the fuzz targets (tests/fuzz/*_fuzzer.cpp): a scratch folder for the
// parsers that read files (under $MS_FUZZ_SCRATCH, else /dev/shm when there is one; removed
// at a normal exit, left behind when a crash ends the process), whole-file
// writes, and splitting one fuzz input into the two files some formats come as.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

namespace mindspeed::fuzz {

/// A folder private to this process, created on first use and removed at exit.
inline const std::string& scratch_dir() {
  struct Folder {
    std::string path;
    Folder() {
      std::error_code ec;
      std::string base = std::filesystem::temp_directory_path(ec).string();
      if (std::filesystem::is_directory("/dev/shm", ec)) base = "/dev/shm";
      const char* env = std::getenv("MS_FUZZ_SCRATCH");  // set by scripts/run_fuzzers.sh
      if (env != nullptr && *env != '\0') base = env;
      path = base + "/ms_fuzz_" + std::to_string(::getpid());
      std::filesystem::remove_all(path, ec);
      std::filesystem::create_directories(path, ec);
    }
    ~Folder() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Folder folder;
  return folder.path;
}

/// scratch_dir() + "/" + name.
inline std::string scratch_file(const std::string& name) { return scratch_dir() + "/" + name; }

/// Writes `bytes` to `path` (replacing it); aborts if the scratch folder is unusable, which
/// is a broken test setup rather than a finding.
inline void write_file(const std::string& path, std::string_view bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) ||
      std::fclose(f) != 0) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

/// The separator between the two files of one input (.idx and .bin, vocab.json and
/// merges.txt). Seeds are written as first + kSplit + second.
constexpr std::string_view kSplit = "\n~~~~~~~~\n";

/// Splits at the first kSplit; without one, everything is the first part.
inline std::pair<std::string_view, std::string_view> split_two(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t at = all.find(kSplit);
  if (at == std::string_view::npos) return {all, std::string_view()};
  return {all.substr(0, at), all.substr(at + kSplit.size())};
}

}  // namespace mindspeed::fuzz
