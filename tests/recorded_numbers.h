// Numbers recorded before a refactor, compared bit for bit after it (the rule "a refactor
// against the numbers recorded before it"). Each key is one file under tests/recorded/
// holding a machine fingerprint line and the values as hexadecimal floats.
//  * MS_RECORD_NUMBERS=1 in the environment writes the files (run the suite once on the
//    tree whose numbers are the reference, then commit them).
//  * Otherwise the values must equal the recorded ones exactly when the fingerprint (CPU
//    model, OpenBLAS core, OpenMP threads, sanitizers) matches the recording build; on
//    another machine or a sanitizer build the code may round differently, so there they are
//    compared within 1e-6 relative and the test says so.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern "C" char* openblas_get_corename(void);

namespace mindspeed::testing {

inline std::string machine_fingerprint() {
  std::string cpu = "unknown-cpu";
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  std::string fingerprint = cpu + " | openblas " + openblas_get_corename() + " | omp " +
                            std::to_string(omp_get_max_threads());
#if defined(__SANITIZE_ADDRESS__)
  fingerprint += " | sanitized build";  // instrumented code may round differently
#endif
  return fingerprint;
}

/// Compares `values` with tests/recorded/<key>.txt (or writes it, see above).
inline void expect_recorded(const std::string& key, const std::vector<double>& values) {
  const std::filesystem::path path = std::filesystem::path(MS_SOURCE_DIR) / "tests" / "recorded" / (key + ".txt");
  const char* record = std::getenv("MS_RECORD_NUMBERS");
  if (record != nullptr && std::string(record) == "1") {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream out(path);
    out << machine_fingerprint() << "\n";
    char buf[64];
    for (double v : values) {
      std::snprintf(buf, sizeof buf, "%a\n", v);
      out << buf;
    }
    return;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "no recorded numbers at " << path << " (MS_RECORD_NUMBERS=1 writes them)";
  std::string fingerprint;
  std::getline(in, fingerprint);
  std::vector<double> want;
  for (std::string line; std::getline(in, line);) want.push_back(std::strtod(line.c_str(), nullptr));
  ASSERT_EQ(values.size(), want.size()) << key;
  const bool same_machine = fingerprint == machine_fingerprint();
  if (!same_machine) {
    std::printf("[recorded] %s: recorded on '%s', running on '%s': comparing within 1e-6\n", key.c_str(),
                fingerprint.c_str(), machine_fingerprint().c_str());
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (same_machine) {
      EXPECT_EQ(values[i], want[i]) << key << " value " << i << " differs from the recorded one (bitwise)";
    } else {
      EXPECT_NEAR(values[i], want[i], 1e-6 * std::fabs(want[i])) << key << " value " << i;
    }
  }
}

}  // namespace mindspeed::testing
