// --auto-settings: the planner behind `pretrain_gpt --auto-settings ...` (MindSpeed's Auto
// Settings, mindspeed/auto_settings). It takes the user's command line, enumerates every
// parallel layout the engine accepts for the target cluster (search_space.h), predicts each
// one's memory per rank and step time (memory_model.h, time_model.h) from profiling runs of
// this binary on this machine (profile.h) or, for a cluster larger than this machine, from
// FLOPs and bandwidths; with --auto-settings-type black it runs every candidate that fits for a
// few iterations instead, with mixed the model's best --auto-settings-top-k; these finalists (for
// black: the fastest k of its runs) then run in --auto-settings-rounds interleaved rounds and
// rank by the median. It prints the top 3 that fit as ready command lines with their predicted
// memory, step time, tokens/s, MFU and the step's breakdown, and writes them all to
// <work dir>/auto_settings_plan.json.
#pragma once

namespace mindspeed {

/// Whether argv asks for the planner (--auto-settings).
bool wants_auto_settings(int argc, const char* const* argv);

/// The planner's program; returns the exit code (0; 2 for bad flags; 1 when nothing fits or a
/// run failed).
int auto_settings_main(int argc, const char* const* argv);

}  // namespace mindspeed
