// flag_catalogue: prints docs/flags.md, the decision on every Megatron-LM, MindSpeed and
// MindSpeed-LLM flag (src/cli/flag_catalogue.h), so that the committed file can be regenerated:
//
//   cmake --build --preset ci --target flag_catalogue && build/ci/tools/flag_catalogue >
//   docs/flags.md
//
// With --help-text it prints pretrain_gpt's --help section instead (accepted and refused flags).
#include "cli/flag_catalogue.h"

#include <cstdio>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  const bool help_text = argc == 2 && std::strcmp(argv[1], "--help-text") == 0;
  if (argc > 2 || (argc == 2 && !help_text)) {
    std::fprintf(stderr, "usage: flag_catalogue [--help-text] > docs/flags.md\n");
    return 2;
  }
  const std::string text =
      help_text ? mindspeed::flag_catalogue_help() : mindspeed::flag_catalogue_markdown();
  std::fwrite(text.data(), 1, text.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
