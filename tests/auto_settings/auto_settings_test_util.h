// Helpers of the auto-settings tests: a command line written as one string, and its
// configuration parsed (and validated) as pretrain_gpt does.
#pragma once

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "cli/arguments.h"
#include "config/validate.h"

namespace mindspeed::testing {

/// "--a 1 --b" -> {"--a", "1", "--b"}.
inline std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

/// `args` parsed, not validated (a failure is a test failure).
inline Configs parsed(const std::vector<std::string>& args) {
  auto p = parse_arguments(args);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return p.ok() ? p->configs : Configs{};
}

/// `args` parsed and validated for `world` ranks with NullTokenizer's 4095 words.
inline Configs validated(const std::vector<std::string>& args, int world) {
  Configs c = parsed(args);
  const Status s = validate_configs(c, world, 4095);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return c;
}

}  // namespace mindspeed::testing
