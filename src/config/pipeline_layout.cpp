// PipelineLayout (pipeline_layout.h).
#include "config/pipeline_layout.h"

#include "core/check.h"

namespace mindspeed {

const char* pipeline_schedule_name(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::kNoPipelining: return "no pipelining";
    case PipelineSchedule::k1F1B: return "1F1B";
    case PipelineSchedule::kInterleaved: return "interleaved 1F1B";
    case PipelineSchedule::kDualPipeV: return "DualPipeV";
  }
  return "?";
}

namespace {

// Layers of each pipeline rank (Megatron's get_num_layers_to_build without virtual stages):
// an even split, or the given first/last stage counts and an even split of the rest over
// the middle stages.
StatusOr<std::vector<int64_t>> layers_per_rank(const ParallelConfig& p, int64_t num_layers) {
  const int P = p.pipeline_model_parallel_size;
  const int64_t first = p.decoder_first_pipeline_num_layers, last = p.decoder_last_pipeline_num_layers;
  if (first == 0 && last == 0) {
    if (num_layers % P != 0) {
      return invalid_argument("--num-layers (", num_layers, ") must be divisible by --pipeline-model-parallel-size (",
                              P, "); or give --decoder-first-pipeline-num-layers / "
                              "--decoder-last-pipeline-num-layers for uneven stages");
    }
    return std::vector<int64_t>(P, num_layers / P);
  }
  if (P == 1) {
    return invalid_argument("--decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers need "
                            "--pipeline-model-parallel-size > 1");
  }
  const int middle = P - (first > 0 ? 1 : 0) - (last > 0 ? 1 : 0);
  const int64_t rest = num_layers - first - last;
  if (rest < 0 || (middle == 0 && rest != 0) || (middle > 0 && (rest == 0 || rest % middle != 0))) {
    return invalid_argument("uneven pipeline stages: --num-layers (", num_layers,
                            ") minus --decoder-first-pipeline-num-layers (", first,
                            ") minus --decoder-last-pipeline-num-layers (", last, ") = ", rest,
                            " layers must split evenly (at least one each) over the ", middle,
                            " other stage(s) of --pipeline-model-parallel-size ", P);
  }
  std::vector<int64_t> out(P, middle > 0 ? rest / middle : 0);
  if (first > 0) out.front() = first;
  if (last > 0) out.back() = last;
  return out;
}

}  // namespace

StatusOr<PipelineLayout> PipelineLayout::build(const ParallelConfig& p, int64_t num_layers, int64_t num_microbatches) {
  const int P = p.pipeline_model_parallel_size;
  PipelineLayout layout;
  layout.pipeline_size = P;
  layout.variable_seq_lengths = p.variable_seq_lengths;
  const bool vpp_by_layers = p.num_layers_per_virtual_pipeline_stage > 0;
  const bool vpp_by_stages = p.num_virtual_stages_per_pipeline_rank > 0;
  const bool uneven = p.decoder_first_pipeline_num_layers > 0 || p.decoder_last_pipeline_num_layers > 0;
  if (p.dualpipev_dw_detach && !p.dualpipev) {
    return invalid_argument("--dualpipev-dw-detach needs --schedules-method dualpipev");
  }
  if (p.microbatch_group_size_per_vp_stage > 0 && !vpp_by_layers && !vpp_by_stages) {
    return invalid_argument("--microbatch-group-size-per-virtual-pipeline-stage needs the interleaved schedule "
                            "(--num-layers-per-virtual-pipeline-stage or --num-virtual-stages-per-pipeline-rank)");
  }
  MS_ASSIGN_OR_RETURN(std::vector<int64_t> rank_layers, layers_per_rank(p, num_layers));
  if (p.multiparameter_pipeline && P < 2) {
    return invalid_argument("--use-multiparameter-pipeline-model-parallel needs --pipeline-model-parallel-size > 1");
  }
  if (p.multiparameter_pipeline && p.dualpipev) {
    return invalid_argument("--use-multiparameter-pipeline-model-parallel does not work with --schedules-method "
                            "dualpipev (MindSpeed's rule)");
  }

  if (p.dualpipev) {
    // MindSpeed's dualpipev_feature.py checks.
    if (P < 2) return invalid_argument("--schedules-method dualpipev needs --pipeline-model-parallel-size > 1");
    if (vpp_by_layers || vpp_by_stages) {
      return invalid_argument("--schedules-method dualpipev does not work with the virtual pipeline "
                              "(--num-layers-per-virtual-pipeline-stage / --num-virtual-stages-per-pipeline-rank)");
    }
    if (uneven) {
      return invalid_argument("--schedules-method dualpipev cuts the model into 2 x --pipeline-model-parallel-size "
                              "equal chunks; leave out --decoder-first/last-pipeline-num-layers (use --noop-layers "
                              "to balance instead)");
    }
    if (num_layers % (2 * P) != 0) {
      return invalid_argument("--schedules-method dualpipev: --num-layers (", num_layers,
                              ") must be a multiple of 2 x --pipeline-model-parallel-size (", 2 * P, ")");
    }
    if (p.context_parallel_size > 1) {
      return invalid_argument("--schedules-method dualpipev does not work with --context-parallel-size > 1");
    }
    if (p.overlap_grad_reduce) {
      return invalid_argument("--schedules-method dualpipev does not work with --overlap-grad-reduce (MindSpeed "
                              "refuses the asynchronous DDP with DualPipeV)");
    }
    if (num_microbatches > 0 && num_microbatches < 2 * P) {
      return invalid_argument("--schedules-method dualpipev needs at least 2 x --pipeline-model-parallel-size (",
                              2 * P, ") micro-batches per data-parallel rank, got ", num_microbatches,
                              " (--global-batch-size / (--micro-batch-size x data-parallel size))");
    }
    layout.schedule = PipelineSchedule::kDualPipeV;
    layout.chunks_per_rank = 2;
    layout.dw_detach = p.dualpipev_dw_detach;
    const int64_t per_chunk = num_layers / (2 * P);
    for (int s = 0; s < 2 * P; ++s) {
      const bool forward_leg = s < P;
      layout.stages.push_back({.rank = forward_leg ? s : 2 * P - 1 - s,
                               .chunk = forward_leg ? 0 : 1,
                               .first_layer = s * per_chunk,
                               .num_layers = per_chunk,
                               .pre_process = s == 0,
                               .post_process = s == 2 * P - 1});
    }
    return layout;
  }

  int v = 1;
  if (vpp_by_layers || vpp_by_stages) {
    // megatron/training/arguments.py, with MindSpeed's relaxation of pp > 2 to pp > 1.
    if (vpp_by_layers && vpp_by_stages) {
      return invalid_argument("give only one of --num-layers-per-virtual-pipeline-stage and "
                              "--num-virtual-stages-per-pipeline-rank");
    }
    if (P < 2) {
      return invalid_argument("the interleaved schedule (virtual pipeline) needs --pipeline-model-parallel-size > 1");
    }
    if (vpp_by_layers) {
      if (uneven) {
        return invalid_argument("with uneven stages give the virtual pipeline as --num-virtual-stages-per-pipeline-rank "
                                "(Megatron's rule), not --num-layers-per-virtual-pipeline-stage");
      }
      const int64_t K = p.num_layers_per_virtual_pipeline_stage, per_rank = num_layers / P;
      if (per_rank % K != 0) {
        return invalid_argument("the layers per pipeline stage (", per_rank,
                                ") must be divisible by --num-layers-per-virtual-pipeline-stage (", K, ")");
      }
      v = static_cast<int>(per_rank / K);
    } else {
      v = p.num_virtual_stages_per_pipeline_rank;
    }
    if (v < 2) {
      return invalid_argument("the interleaved schedule needs at least 2 virtual stages per pipeline rank (MindSpeed: "
                              "layers per stage / --num-layers-per-virtual-pipeline-stage > 1), got ", v,
                              "; leave out the virtual-pipeline flags for plain 1F1B");
    }
    for (int r = 0; r < P; ++r) {
      if (rank_layers[r] % v != 0) {
        return invalid_argument("pipeline rank ", r, " holds ", rank_layers[r],
                                " layers, not divisible into ", v, " virtual stages");
      }
    }
    const int64_t G = p.microbatch_group_size_per_vp_stage > 0 ? p.microbatch_group_size_per_vp_stage : P;
    if (G < P) {
      return invalid_argument("--microbatch-group-size-per-virtual-pipeline-stage (", G,
                              ") must be at least --pipeline-model-parallel-size (", P, ")");
    }
    if (num_microbatches > 0) {
      if (num_microbatches < G) {
        return invalid_argument("the interleaved schedule needs at least ", G,
                                " micro-batches per data-parallel rank (--microbatch-group-size-per-virtual-pipeline-"
                                "stage, default --pipeline-model-parallel-size), got ", num_microbatches);
      }
      const int64_t rest = num_microbatches % G;
      if (rest != 0 && rest < P) {
        return invalid_argument("the interleaved schedule: the last group of micro-batches (", num_microbatches,
                                " mod ", G, " = ", rest, ") must be empty or at least --pipeline-model-parallel-size (",
                                P, ") (Megatron's schedule table)");
      }
    }
    layout.microbatch_group_size = G;
  }
  layout.chunks_per_rank = v;
  layout.schedule = P == 1 ? PipelineSchedule::kNoPipelining
                           : (v > 1 ? PipelineSchedule::kInterleaved : PipelineSchedule::k1F1B);
  int64_t offset = 0;
  for (int c = 0; c < v; ++c) {
    for (int r = 0; r < P; ++r) {
      const int64_t n = rank_layers[r] / v;
      layout.stages.push_back({.rank = r, .chunk = c, .first_layer = offset, .num_layers = n});
      offset += n;
    }
  }
  MS_CHECK(offset == num_layers, "pipeline layout covers ", offset, " of ", num_layers, " layers");
  layout.stages.front().pre_process = true;
  layout.stages.back().post_process = true;
  return layout;
}

PipelineLayout PipelineLayout::single(int64_t num_layers) {
  PipelineLayout layout;
  layout.stages.push_back(
      {.rank = 0, .chunk = 0, .first_layer = 0, .num_layers = num_layers, .pre_process = true, .post_process = true});
  return layout;
}

int PipelineLayout::stage_of(int rank, int chunk) const {
  for (size_t s = 0; s < stages.size(); ++s) {
    if (stages[s].rank == rank && stages[s].chunk == chunk) return static_cast<int>(s);
  }
  MS_CHECK(false, "no pipeline stage for rank ", rank, " chunk ", chunk);
  return -1;
}

std::vector<PipelineStage> PipelineLayout::stages_of_rank(int rank) const {
  std::vector<PipelineStage> out(static_cast<size_t>(chunks_per_rank));
  for (const PipelineStage& s : stages) {
    if (s.rank == rank) out[static_cast<size_t>(s.chunk)] = s;
  }
  return out;
}

}  // namespace mindspeed
