// merge_traces: the per-rank traces of a --profile run (rank_NNNNN.trace.json in
// --profile-save-path) as one Chrome trace JSON file, one process per rank, that Perfetto or
// chrome://tracing open to show every rank on one timeline. Each rank's timestamps count
// from the moment it left the same world barrier (profiler::set_sync_point), so the ranks'
// clocks line up without further shifting; each process is named after its rank and its
// (tp, pp, dp, cp) coordinates, and the ranks' metadata (window, communication counters) is
// kept under "metadata": {"ranks": [...]}.
//
//   merge_traces --input PROFILE_DIR --output merged.json
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

using nlohmann::json;

int fail(const std::string& message) {
  std::fprintf(stderr, "merge_traces: error: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string input, output;
  CLI::App app{"Merge the per-rank traces of a --profile run into one Chrome trace JSON file"};
  app.add_option("--input", input, "Directory holding rank_NNNNN.trace.json (--profile-save-path)")->required();
  app.add_option("--output", output, "Merged trace file to write")->required();
  CLI11_PARSE(app, argc, argv);

  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(input, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("rank_") && name.ends_with(".trace.json")) files.push_back(entry.path());
  }
  if (ec) return fail("cannot read the directory '" + input + "': " + ec.message());
  if (files.empty()) return fail("'" + input + "' holds no rank_NNNNN.trace.json (was the run started with --profile?)");
  std::sort(files.begin(), files.end());

  json events = json::array(), ranks = json::array();
  for (const auto& path : files) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    json trace = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (trace.is_discarded() || !trace.is_object() || !trace.contains("traceEvents") ||
        !trace["traceEvents"].is_array() || !trace.contains("metadata") || !trace["metadata"].is_object()) {
      return fail("'" + path.string() + "' is not a trace written by --profile (damaged or truncated?)");
    }
    const json& meta = trace["metadata"];
    std::string label = "rank " + std::to_string(meta.value("rank", -1));
    if (meta.contains("coordinates") && meta["coordinates"].is_object()) {
      const json& c = meta["coordinates"];
      label += " (tp " + std::to_string(c.value("tp", 0)) + ", pp " + std::to_string(c.value("pp", 0)) + ", dp " +
               std::to_string(c.value("dp", 0)) + ", cp " + std::to_string(c.value("cp", 0)) + ")";
    }
    for (json& e : trace["traceEvents"]) {
      if (e.is_object() && e.value("ph", "") == "M" && e.value("name", "") == "process_name") {
        e["args"]["name"] = label;
      }
      events.push_back(std::move(e));
    }
    ranks.push_back(meta);
  }
  json merged = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"metadata", {{"ranks", ranks}}}};
  const std::string tmp = output + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << merged.dump() << "\n";
    if (!out.flush()) return fail("cannot write '" + tmp + "' (disk full?)");
  }
  std::filesystem::rename(tmp, output, ec);
  if (ec) return fail("cannot rename '" + tmp + "' to '" + output + "': " + ec.message());
  std::printf("merged %zu rank traces into %s\n", files.size(), output.c_str());
  return 0;
}
