// ParameterRegistry, tensor-parallel slicing and master-weight initialisation.
#include "module/parameter.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/rng.h"

namespace mindspeed {

Parameter* ParameterRegistry::add(ParameterSpec spec, int tp_size) {
  MS_CHECK(by_name_.count(spec.name) == 0, "parameter ", spec.name, " declared twice");
  auto p = std::make_unique<Parameter>();
  Shape local = spec.global_shape;
  switch (spec.split) {
    case TensorParallelSplit::kReplicated: break;
    case TensorParallelSplit::kRows:
    case TensorParallelSplit::kGluRows: {
      const int64_t pieces = spec.split == TensorParallelSplit::kGluRows ? 2 * tp_size : tp_size;
      MS_CHECK(local[0] % pieces == 0, spec.name, ": dim 0 (", local[0], ") not divisible by ", pieces);
      local[0] /= tp_size;
      break;
    }
    case TensorParallelSplit::kColumns:
      MS_CHECK(local.ndim() == 2 && local[1] % tp_size == 0, spec.name, ": dim 1 not divisible by ",
               tp_size);
      local[1] /= tp_size;
      break;
  }
  p->spec = std::move(spec);
  p->local_shape = local;
  by_name_.emplace(p->spec.name, p.get());
  params_.push_back(std::move(p));
  return params_.back().get();
}

ModelBuffer* ParameterRegistry::add_buffer(std::string name, int64_t n, bool persistent) {
  MS_CHECK(by_name_.count(name) == 0, "buffer ", name, " has a parameter's name");
  for (const auto& b : buffers_) MS_CHECK(b->name != name, "buffer ", name, " declared twice");
  buffers_.push_back(std::make_unique<ModelBuffer>(ModelBuffer{std::move(name), std::vector<float>(static_cast<size_t>(n), 0.0f), persistent}));
  return buffers_.back().get();
}

Parameter* ParameterRegistry::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

int64_t ParameterRegistry::num_local_elements() const {
  int64_t n = 0;
  for (const auto& p : params_) n += p->local_shape.numel();
  return n;
}

ShardCoords shard_coords(const ParameterSpec& spec, const ParallelState& ps) {
  if (spec.expert_parallel) return {ps.etp_rank, ps.sizes.expert_tensor};
  return {ps.tp_rank, ps.sizes.tensor};
}

std::vector<ShardRun> shard_runs(const ParameterSpec& spec, int tp_rank, int tp_size) {
  const Shape& g = spec.global_shape;
  const int64_t rows = g.ndim() > 0 ? g[0] : 1, width = g.ndim() > 1 ? g.numel() / g[0] : 1;
  std::vector<ShardRun> runs;
  auto add_rows = [&](int64_t first, int64_t count) {
    for (int64_t r = first; r < first + count; ++r) {
      const int64_t at = runs.empty() ? 0 : runs.back().local_offset + (runs.back().col_end - runs.back().col_begin);
      runs.push_back({r, 0, width, at});
    }
  };
  switch (spec.split) {
    case TensorParallelSplit::kReplicated: add_rows(0, rows); break;
    case TensorParallelSplit::kRows: add_rows(tp_rank * (rows / tp_size), rows / tp_size); break;
    case TensorParallelSplit::kGluRows: {
      const int64_t half = rows / 2, mine = half / tp_size;
      add_rows(tp_rank * mine, mine);
      add_rows(half + tp_rank * mine, mine);
      break;
    }
    case TensorParallelSplit::kColumns: {
      const int64_t cols = width / tp_size;
      for (int64_t r = 0; r < rows; ++r) runs.push_back({r, tp_rank * cols, (tp_rank + 1) * cols, r * cols});
      break;
    }
  }
  return runs;
}

std::vector<ShardPlace> locate_in_shards(const ParameterSpec& spec, int tp_size, const ShardRun& run) {
  const Shape& g = spec.global_shape;
  const int64_t rows = g.ndim() > 0 ? g[0] : 1, width = g.ndim() > 1 ? g.numel() / g[0] : 1;
  const int64_t n = run.col_end - run.col_begin;
  switch (spec.split) {
    case TensorParallelSplit::kReplicated: return {{0, run.row * width + run.col_begin, n}};
    case TensorParallelSplit::kRows: {
      const int64_t mine = rows / tp_size;
      return {{static_cast<int>(run.row / mine), (run.row % mine) * width + run.col_begin, n}};
    }
    case TensorParallelSplit::kGluRows: {
      const int64_t half = rows / 2, mine = half / tp_size;
      const bool up = run.row >= half;
      const int64_t r = up ? run.row - half : run.row;
      return {{static_cast<int>(r / mine), ((up ? mine : 0) + r % mine) * width + run.col_begin, n}};
    }
    case TensorParallelSplit::kColumns: {
      const int64_t cols = width / tp_size;
      std::vector<ShardPlace> places;
      for (int64_t c = run.col_begin; c < run.col_end;) {
        const int64_t t = c / cols, end = std::min(run.col_end, (t + 1) * cols);
        places.push_back({static_cast<int>(t), run.row * cols + (c - t * cols), end - c});
        c = end;
      }
      return places;
    }
  }
  return {};
}

void slice_for_rank(float* out, const float* full, const ParameterSpec& spec, int tp_rank,
                    int tp_size) {
  const int64_t width = spec.global_shape.ndim() > 1 ? spec.global_shape.numel() / spec.global_shape[0] : 1;
  for (const ShardRun& run : shard_runs(spec, tp_rank, tp_size)) {
    std::memcpy(out + run.local_offset, full + run.row * width + run.col_begin,
                sizeof(float) * (run.col_end - run.col_begin));
  }
}

void unslice_from_rank(float* full, const float* shard, const ParameterSpec& spec, int tp_rank,
                       int tp_size) {
  const int64_t width = spec.global_shape.ndim() > 1 ? spec.global_shape.numel() / spec.global_shape[0] : 1;
  for (const ShardRun& run : shard_runs(spec, tp_rank, tp_size)) {
    std::memcpy(full + run.row * width + run.col_begin, shard + run.local_offset,
                sizeof(float) * (run.col_end - run.col_begin));
  }
}

void set_parameter_from_shard(Parameter& p, const float* shard, const Backend* backend) {
  const int64_t n = p.local_shape.numel();
  MS_CHECK(p.data.dtype == DType::kFloat32 || is_half_precision(p.data.dtype), p.spec.name,
           ": unsupported parameter dtype");
  // Initialisation and checkpoints go through host memory: the values in the parameter's
  // storage format on the host, then into the parameter (a transfer on a device).
  std::vector<uint16_t> half;
  const void* values = shard;
  if (p.data.dtype == DType::kFloat16) {
    half.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) half[static_cast<size_t>(i)] = float_to_fp16(shard[i]).bits;
    values = half.data();
  } else if (p.data.dtype == DType::kBFloat16) {
    half.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) half[static_cast<size_t>(i)] = float_to_bf16(shard[i]).bits;
    values = half.data();
  }
  if (backend != nullptr) {
    backend->kernels.copy_to_device(backend->context, p.data.data, values, p.data.nbytes());
  } else {
    std::memcpy(p.data.data, values, static_cast<size_t>(p.data.nbytes()));
  }
}

void set_parameter_from_full(Parameter& p, const float* full, int tp_rank, int tp_size, const Backend* backend) {
  std::vector<float> shard(static_cast<size_t>(p.local_shape.numel()));
  slice_for_rank(shard.data(), full, p.spec, tp_rank, tp_size);
  set_parameter_from_shard(p, shard.data(), backend);
}

void init_full_tensor(float* full, const ParameterSpec& spec, uint64_t seed) {
  const int64_t n = spec.global_shape.numel();
  switch (spec.init) {
    case InitMethod::kZeros: std::fill(full, full + n, 0.0f); return;
    case InitMethod::kOnes: std::fill(full, full + n, 1.0f); return;
    case InitMethod::kNormal:
      // A tied copy draws from its original's stream, so both stages start equal.
      fill_normal(full, n, 0.0f, spec.init_std,
                  RngStream{seed, hash_name(spec.tied_to.empty() ? spec.name : spec.tied_to)});
      return;
  }
}

}  // namespace mindspeed
