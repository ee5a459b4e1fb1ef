// merge_datasets: concatenates every indexed dataset (.bin/.idx pair) of a directory into one.
// Port of Megatron-LM tools/merge_datasets.py (core_v0.12.0): same flags (--input,
// --output-prefix, --multimodal), same order (prefixes sorted), same bytes (add_index).
//
// As in Megatron, every regular file of --input must belong to a .bin/.idx pair and all
// datasets must share one dtype (taken from the first). Differences: an --output-prefix
// without a directory part means the current directory (Megatron asserts), an empty
// directory and an output that is also an input are refused with a message, and the
// output is written atomically.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/logging.h"
#include "core/status.h"
#include "datasets/indexed_dataset.h"

namespace mindspeed {
namespace {

namespace fs = std::filesystem;

// Python's os.path.splitext on a base name: the extension starts at the last dot, unless
// only dots precede it (".bin" has no extension).
std::pair<std::string, std::string> splitext(const std::string& name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos || name.find_first_not_of('.') >= dot) return {name, ""};
  return {name.substr(0, dot), name.substr(dot)};
}

Status run(const std::string& input, const std::string& output_prefix, bool multimodal) {
  std::error_code ec;
  if (!fs::is_directory(input, ec)) {
    return invalid_argument("--input '", input, "' is not a directory or does not exist");
  }
  const fs::path out_dir = fs::path(output_prefix).parent_path();
  if (!out_dir.empty() && !fs::is_directory(out_dir, ec)) {
    return invalid_argument("--output-prefix '", output_prefix, "': directory '",
                            out_dir.string(), "' does not exist");
  }
  std::set<std::string> prefixes;
  for (const auto& entry : fs::directory_iterator(input, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    const auto [prefix, ext] = splitext(entry.path().filename().string());
    if (prefixes.count(prefix) > 0) continue;
    const std::string pair = ext == ".idx" ? ".bin" : ".idx";
    const fs::path partner = fs::path(input) / (prefix + pair);
    if (!fs::is_regular_file(partner, ec)) {
      return invalid_argument("--input '", input, "': '", partner.string(), "' is missing for '",
                              entry.path().string(), "' (every file of the directory must "
                              "belong to a .bin/.idx pair)");
    }
    prefixes.insert(prefix);
  }
  if (ec) return invalid_argument("--input '", input, "': cannot list it: ", ec.message());
  if (prefixes.empty()) {
    return invalid_argument("--input '", input, "' holds no .bin/.idx pairs to merge");
  }
  const auto same_file = [&](const std::string& a, const std::string& b) {
    std::error_code e;
    return fs::equivalent(a, b, e);
  };
  for (const std::string& prefix : prefixes) {
    const std::string path = (fs::path(input) / prefix).string();
    if (same_file(get_idx_path(path), get_idx_path(output_prefix)) ||
        same_file(get_bin_path(path), get_bin_path(output_prefix))) {
      return invalid_argument("--output-prefix '", output_prefix, "' is one of the inputs ('",
                              path, "'); write the merged dataset elsewhere");
    }
  }

  std::unique_ptr<IndexedDatasetBuilder> builder;
  for (const std::string& prefix : prefixes) {  // std::set: sorted, as sorted(prefixes)
    const std::string path = (fs::path(input) / prefix).string();
    if (builder == nullptr) {
      MS_ASSIGN_OR_RETURN(auto first, IndexedDataset::open(path, multimodal));
      MS_ASSIGN_OR_RETURN(builder, IndexedDatasetBuilder::create(get_bin_path(output_prefix),
                                                                 first->dtype(), multimodal));
    }
    MS_RETURN_IF_ERROR(builder->add_index(path));
    log_info("Added ", path);
  }
  MS_RETURN_IF_ERROR(builder->finalize(get_idx_path(output_prefix)));
  log_info("Wrote ", output_prefix, ".{bin,idx}: ", prefixes.size(), " datasets, ",
           builder->num_documents(), " documents, ", builder->num_sequences(), " sequences, ",
           builder->num_tokens(), " tokens (", indexed_dtype_name(builder->dtype()), ")");
  return ok_status();
}

}  // namespace
}  // namespace mindspeed

int main(int argc, char** argv) {
  std::string input;
  std::string output_prefix;
  bool multimodal = false;
  CLI::App app{"Merge every indexed dataset (.bin/.idx pair) in a directory into one, in sorted "
               "order. Port of Megatron-LM tools/merge_datasets.py."};
  app.add_option("--input", input, "Path to directory containing all document files to merge")
      ->required();
  app.add_option("--output-prefix", output_prefix, "Path to binary output file without suffix")
      ->required();
  app.add_flag("--multimodal", multimodal, "Whether the datasets are assumed to be multimodal");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    const mindspeed::Status status = mindspeed::run(input, output_prefix, multimodal);
    if (!status.ok()) {
      std::fprintf(stderr, "merge_datasets: error: %s\n", status.message().c_str());
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "merge_datasets: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}
