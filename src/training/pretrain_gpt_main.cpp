// pretrain_gpt_main (pretrain_gpt_main.h). Every rank parses and validates the same command
// line before the first collective, so a bad flag stops all ranks together (rank 0 prints
// the reason, exit code 2). After that any failure on any rank aborts the whole job with
// that rank's message (MPI_Abort).
#include "training/pretrain_gpt_main.h"

#include <cstdio>
#include <exception>

#include "cli/arguments.h"
#include "config/validate.h"
#include "core/check.h"
#include "core/logging.h"
#include "parallel/initialize.h"
#include "parallel/rank_generator.h"
#include "tokenizer/pretrain_handler.h"

namespace mindspeed {
namespace {

int run(int argc, char** argv, const PretrainHooks& hooks) {
  MpiWorld world = initialize_mpi(&argc, &argv);
  auto stop = [&](const std::string& message, int code) {
    if (world.rank == 0 && !message.empty()) std::fprintf(stderr, "pretrain_gpt: %s\n", message.c_str());
    finalize_mpi();
    return code;
  };
  auto parsed = parse_arguments(argc, argv);
  if (!parsed.ok()) return stop("error: " + parsed.status().to_string(), 2);
  if (parsed->help_requested) {
    if (world.rank == 0) std::printf("%s", parsed->help_text.c_str());
    return stop("", 0);
  }
  Configs configs = parsed->configs;
  if (configs.auto_settings.enabled) {
    // apps/pretrain_gpt hands --auto-settings to the planner before this point.
    return stop(
        "error: --auto-settings is run by the pretrain_gpt program's planner (auto_settings/), not "
        "by "
        "pretrain_gpt_main",
        2);
  }
  if (configs.parallel.dry_run_world_size > 0) {
    // Print the process groups of a (possibly huge) layout without starting it.
    const ParallelLayout layout = parallel_layout(configs.parallel, configs.parallel.dry_run_world_size);
    auto groups = build_parallel_groups(layout);
    if (!groups.ok()) return stop("error: " + groups.status().to_string(), 2);
    if (world.rank == 0) std::printf("%s", format_parallel_groups(layout, *groups).c_str());
    return stop("", 0);
  }
  // The tokenizer first: validation derives the padded vocabulary from its size. A bad
  // tokenizer file is bad input, refused like a bad flag.
  auto tokenizer = build_tokenizer_from_config(configs.data);
  if (!tokenizer.ok()) return stop("error: " + tokenizer.status().to_string(), 2);
  if (Status s = validate_configs(configs, world.size, (*tokenizer)->vocab_size()); !s.ok()) {
    return stop("error: " + s.to_string(), 2);
  }
  // The end-of-document flags need an end-of-document token (MindSpeed-LLM raises too).
  const DataConfig& d = configs.data;
  if (!d.handler_name.empty()) {
    if (auto handler = parse_pretrain_handler(d.handler_name); !handler.ok()) {
      return stop("error: " + handler.status().to_string(), 2);
    }
  }
  if ((*tokenizer)->eod() < 0 && (d.eod_mask_loss || d.reset_position_ids || d.reset_attention_mask)) {
    return stop("error: InvalidArgument: --eod-mask-loss / --reset-position-ids / --reset-attention-mask need an "
                "end-of-document token, and --tokenizer-type " + d.tokenizer_type + " has none (give the tokenizer an "
                "eos token, e.g. eos_token in tokenizer_config.json)", 2);
  }
  const Configs& validated = configs;  // final from here on
  if (world.rank == 0) {
    for (const std::string& note : parsed->notes) log_info("> ", note);
  }
  if (Status s = pretrain(validated, **tokenizer, world, hooks); !s.ok()) {
    if (s.code() != StatusCode::kAborted) fatal(s.to_string());  // this rank alone: abort the job
    // A failure every rank agreed on: one rank reports it, all exit cleanly with code 1.
    if (!s.message().empty()) print_fatal(s.message());
    finalize_mpi();
    return 1;
  }
  return stop("", 0);
}

}  // namespace

int pretrain_gpt_main(int argc, char** argv, const PretrainHooks& hooks) {
  try {
    return run(argc, argv, hooks);
  } catch (const std::exception& e) {
    fatal(std::string("uncaught exception: ") + e.what());
  } catch (...) {
    fatal("uncaught exception");
  }
}

}  // namespace mindspeed
