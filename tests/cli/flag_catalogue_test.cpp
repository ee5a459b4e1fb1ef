// The flag catalogue decided (src/cli/flag_catalogue.h): every Megatron-LM / MindSpeed /
// MindSpeed-LLM flag has exactly one decision that follows the parser (registered_flag_names()),
// refusal rows of registered flags are reported as stale, docs/flags.md is the generated text, and
// the --help section and the refusal error carry the reasons.
#include "cli/flag_catalogue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/arguments.h"
#include "cli/known_flags.h"

namespace mindspeed {
namespace {

constexpr const char* kRegenerate =
    "cmake --build --preset ci --target flag_catalogue && build/ci/tools/flag_catalogue > "
    "docs/flags.md";

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += "  " + line + "\n";
  return out;
}

bool mentions(const std::vector<std::string>& problems, const std::string& name,
              const std::string& word) {
  return std::any_of(problems.begin(), problems.end(), [&](const std::string& p) {
    return p.starts_with(name + " ") && p.find(word) != std::string::npos;
  });
}

const FlagRuling* find(const std::vector<FlagRuling>& rulings, std::string_view name) {
  for (const FlagRuling& r : rulings) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

TEST(FlagCatalogue, EveryFlagHasOneDecisionThatFollowsTheParser) {
  const std::vector<std::string> registered = registered_flag_names();
  ASSERT_GT(registered.size(), 100u);
  const std::vector<std::string> problems = flag_catalogue_problems(registered);
  EXPECT_TRUE(problems.empty()) << problems.size() << " problem(s):\n" << joined(problems);
}

TEST(FlagCatalogue, EveryRegisteredFlagIsCataloguedAndNoRefusedFlagIsRegistered) {
  const std::vector<std::string> registered = registered_flag_names();
  const std::set<std::string> reg(registered.begin(), registered.end());
  const std::vector<FlagRuling> rulings = flag_catalogue(registered);
  for (const std::string& name : registered) {
    const FlagRuling* r = find(rulings, name);
    ASSERT_NE(r, nullptr) << name << " is registered but not in the catalogue";
    EXPECT_NE(r->decision, FlagDecision::kRefused) << name;
  }
  for (const FlagRuling& r : rulings) {
    const bool is_registered = reg.count(std::string(r.name)) != 0;
    EXPECT_EQ(r.decision != FlagDecision::kRefused, is_registered) << r.name;
  }
}

TEST(FlagCatalogue, CoversTheKnownFlagsAndTheEngineOnlyFlags) {
  const std::vector<FlagRuling> rulings = flag_catalogue();
  EXPECT_EQ(rulings.size(), known_flags().size() + engine_only_flags().size());
  for (std::size_t i = 1; i < rulings.size(); ++i) {
    EXPECT_LT(rulings[i - 1].name, rulings[i].name) << "at index " << i;
  }
  for (const EngineFlag& e : engine_only_flags()) {
    EXPECT_EQ(find_known_flag(e.name), nullptr) << e.name;
    EXPECT_FALSE(e.description.empty()) << e.name;
  }
}

TEST(FlagCatalogue, ReasonsArePresentShortAndOnOneLine) {
  for (const FlagRuling& r : flag_catalogue()) {
    switch (r.decision) {
      case FlagDecision::kImplemented:
        EXPECT_TRUE(r.home.empty()) << r.name;
        EXPECT_EQ(r.reason.empty(), r.source != "mindspeed-cpp") << r.name;
        break;
      case FlagDecision::kAccepted:
        EXPECT_FALSE(r.reason.empty()) << r.name;
        EXPECT_TRUE(r.home.empty()) << r.name;
        break;
      case FlagDecision::kRefused:
        EXPECT_FALSE(r.reason.empty()) << r.name;
        EXPECT_FALSE(r.home.empty()) << r.name;
        EXPECT_EQ(r.reason.find("no decision"), std::string::npos) << r.name;
        break;
    }
    EXPECT_LE(r.reason.size(), 200u) << r.name;
    EXPECT_EQ(r.reason.find('\n'), std::string::npos) << r.name;
    EXPECT_EQ(r.reason.find('|'), std::string::npos) << r.name;
  }
}

TEST(FlagCatalogue, EveryRefusalCategoryIsUsedAndHasAHome) {
  std::set<RefusalCategory> used;
  for (const FlagRuling& r : flag_catalogue()) {
    if (r.decision == FlagDecision::kRefused) used.insert(r.category);
  }
  std::set<std::string_view> keys;
  for (const RefusalCategoryInfo& c : refusal_categories()) {
    EXPECT_TRUE(used.count(c.category) != 0) << c.key << " refuses no flag: delete it";
    EXPECT_FALSE(c.reason.empty()) << c.key;
    EXPECT_FALSE(c.home.empty()) << c.key;
    EXPECT_TRUE(keys.insert(c.key).second) << c.key;
  }
}

// The checks of flag_catalogue_problems() against parsers that differ from the real one.
TEST(FlagCatalogue, ARefusalRowOfARegisteredFlagIsReportedAsStale) {
  std::vector<std::string> registered = registered_flag_names();
  const std::vector<FlagRuling> rulings = flag_catalogue(registered);
  const auto refused = std::find_if(rulings.begin(), rulings.end(), [](const FlagRuling& r) {
    return r.decision == FlagDecision::kRefused;
  });
  ASSERT_NE(refused, rulings.end());
  const std::string name(refused->name);
  registered.push_back(name);
  const std::vector<std::string> problems = flag_catalogue_problems(registered);
  EXPECT_TRUE(mentions(problems, name, "stale")) << joined(problems);
  // ... and once registered it is implemented, not refused.
  EXPECT_EQ(find(flag_catalogue(registered), name)->decision, FlagDecision::kImplemented);
}

TEST(FlagCatalogue, AnUnregisteredFlagWithoutARefusalRowHasNoDecision) {
  std::vector<std::string> registered = registered_flag_names();
  const std::vector<FlagRuling> rulings = flag_catalogue(registered);
  const auto implemented = std::find_if(rulings.begin(), rulings.end(), [](const FlagRuling& r) {
    return r.decision == FlagDecision::kImplemented && r.source != "mindspeed-cpp";
  });
  ASSERT_NE(implemented, rulings.end());
  const std::string name(implemented->name);
  registered.erase(std::find(registered.begin(), registered.end(), name));
  EXPECT_TRUE(mentions(flag_catalogue_problems(registered), name, "no decision"));
}

TEST(FlagCatalogue, AnAcceptedFlagMustBeRegistered) {
  std::vector<std::string> registered = registered_flag_names();
  ASSERT_NE(std::find(registered.begin(), registered.end(), "--distributed-backend"),
            registered.end());
  registered.erase(std::find(registered.begin(), registered.end(), "--distributed-backend"));
  EXPECT_TRUE(
      mentions(flag_catalogue_problems(registered), "--distributed-backend", "not register"));
}

TEST(FlagCatalogue, ARegisteredFlagInNoCatalogueIsReported) {
  std::vector<std::string> registered = registered_flag_names();
  registered.push_back("--definitely-not-a-megatron-flag");
  EXPECT_TRUE(mentions(flag_catalogue_problems(registered), "--definitely-not-a-megatron-flag",
                       "no catalogue"));
}

TEST(FlagCatalogue, AcceptedNoOpsAndMappingsSayWhy) {
  const std::vector<FlagRuling> rulings = flag_catalogue();
  for (const char* name : {"--distributed-backend", "--ai-framework", "--num-workers",
                           "--use-mcore-models", "--transformer-impl"}) {
    const FlagRuling* r = find(rulings, name);
    ASSERT_NE(r, nullptr) << name;
    EXPECT_EQ(r->decision, FlagDecision::kAccepted) << name;
  }
  EXPECT_NE(find(rulings, "--distributed-backend")->reason.find("MPI"), std::string::npos);
  EXPECT_NE(find(rulings, "--use-mcore-models")->reason.find("Megatron core_v0.12 too"),
            std::string::npos);
  EXPECT_EQ(find(rulings, "--tensor-model-parallel-size")->decision, FlagDecision::kImplemented);
}

TEST(FlagCatalogue, RefusalsNameTheirCategoryAndRoadmap) {
  EXPECT_EQ(flag_refusal_reason("--tensor-model-parallel-size"), "");
  EXPECT_EQ(flag_refusal_reason("--definitely-not-a-megatron-flag"), "");
  const std::vector<std::string> registered = registered_flag_names();
  const auto is_registered = [&](const char* name) {
    return std::find(registered.begin(), registered.end(), name) != registered.end();
  };
  struct Expected {
    const char* name;
    const char* text;
  };
  for (const Expected& e :
       {Expected{"--fp8-format", "[future: GPU backend]"},
        Expected{"--tp-comm-overlap", "Transformer Engine"},
        Expected{"--retro-add-retriever", "another model family"},
        Expected{"--batch-size", "use --micro-batch-size"}, Expected{"--lora-r", "fine-tuning"},
        Expected{"--use-torch-fsdp2", "[issue 14]"}, Expected{"--cp-comm-type", "[issue 12]"},
        Expected{"--calculate-per-token-loss", "[issue 15]"}}) {
    if (is_registered(e.name)) continue;  // implemented since; the stale check covers its row
    const std::string reason = flag_refusal_reason(e.name);
    EXPECT_NE(reason.find(e.text), std::string::npos) << e.name << ": " << reason;
  }
}

TEST(FlagCatalogue, TheRefusalMessageNamesTheProjectGroupAndReason) {
  const std::string message = flag_refusal_message("--use-torch-fsdp2");
  EXPECT_TRUE(
      message.starts_with("--use-torch-fsdp2 is a Megatron-LM flag (distributed) that "
                          "mindspeed-cpp does not implement: "))
      << message;
  EXPECT_NE(message.find(flag_refusal_reason("--use-torch-fsdp2")), std::string::npos) << message;
  EXPECT_NE(flag_refusal_message("--lora-r").find("is a MindSpeed-LLM flag"), std::string::npos);
  EXPECT_NE(flag_refusal_message("--aiqos").find("is a MindSpeed flag"), std::string::npos);
  EXPECT_EQ(flag_refusal_message("--definitely-not-a-megatron-flag"), "");
}

TEST(FlagCatalogue, HelpHasOneLinePerAcceptedAndRefusedFlag) {
  const std::string help = flag_catalogue_help();
  std::size_t lines = 0;
  std::istringstream in(help);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("  --")) ++lines;
  }
  std::size_t expected = 0;
  for (const FlagRuling& r : flag_catalogue()) {
    if (r.decision != FlagDecision::kImplemented) {
      ++expected;
      EXPECT_NE(help.find("\n  " + std::string(r.name) + ": "), std::string::npos) << r.name;
    }
  }
  EXPECT_EQ(lines, expected);
}

TEST(FlagCatalogue, DocsFlagsMdIsTheGeneratedText) {
  const std::string path = std::string(MS_SOURCE_DIR) + "/docs/flags.md";
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in.good()) << path << " is missing; generate it: " << kRegenerate;
  std::stringstream text;
  text << in.rdbuf();
  const std::string generated = flag_catalogue_markdown();
  if (text.str() != generated) {
    // The first differing line, to show what changed.
    std::istringstream a(text.str()), b(generated);
    std::string la, lb;
    int line = 0;
    while (true) {
      const bool more_a = static_cast<bool>(std::getline(a, la));
      const bool more_b = static_cast<bool>(std::getline(b, lb));
      ++line;
      if (!more_a && !more_b) break;
      if (!more_a || !more_b || la != lb) break;
    }
    ADD_FAILURE() << "docs/flags.md is stale (first difference at line " << line
                  << ":\n  file:      " << la << "\n  generated: " << lb
                  << ")\nregenerate it: " << kRegenerate;
  }
}

}  // namespace
}  // namespace mindspeed
