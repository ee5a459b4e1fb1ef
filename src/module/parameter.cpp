// ParameterRegistry, tensor-parallel slicing and master-weight initialisation.
#include "module/parameter.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/rng.h"

namespace mindspeed {

UnitShare unaligned_share(int64_t units, int tp_size, int tp_rank) {
  const int64_t base = units / tp_size, extra = units % tp_size;
  return {tp_rank * base + std::min<int64_t>(tp_rank, extra), base + (tp_rank < extra ? 1 : 0)};
}

SplitPiece split_piece(const ParameterSpec& spec, int64_t length, int tp_rank, int tp_size) {
  if (spec.split_units <= 0) return {tp_rank * (length / tp_size), length / tp_size};
  const int64_t unit = length / spec.split_units;
  const UnitShare share = unaligned_share(spec.split_units, tp_size, tp_rank);
  return {share.first * unit, share.count * unit};
}

namespace {
// The 2D grid of a k2d split over tp_size ranks: rank t at (t % X, t / X).
struct Grid2d {
  int X = 1, Y = 1;
  bool rows_over_x = true;  ///< dim 0 cut over X (dim 1 over Y), else the other way round
  bool glu = false;
};
Grid2d grid_of(const ParameterSpec& spec, int tp_size) {
  MS_CHECK(spec.tp_x > 0 && tp_size % spec.tp_x == 0, spec.name, ": 2D split with tp_x ", spec.tp_x,
           " over ", tp_size, " ranks");
  return {spec.tp_x, tp_size / spec.tp_x, spec.split != TensorParallelSplit::k2dRowsYColumnsX,
          spec.split == TensorParallelSplit::k2dGluRowsXColumnsY};
}
}  // namespace

Parameter* ParameterRegistry::add(ParameterSpec spec, int tp_size, int tp_rank) {
  MS_CHECK(by_name_.count(spec.name) == 0, "parameter ", spec.name, " declared twice");
  auto p = std::make_unique<Parameter>();
  Shape local = spec.global_shape;
  const bool glu = spec.split == TensorParallelSplit::kGluRows;
  const int dim = spec.split == TensorParallelSplit::kColumns ? 1 : 0;
  const bool two_d = spec.split == TensorParallelSplit::k2dRowsXColumnsY ||
                     spec.split == TensorParallelSplit::k2dGluRowsXColumnsY ||
                     spec.split == TensorParallelSplit::k2dRowsYColumnsX;
  if (two_d) {
    const Grid2d g = grid_of(spec, tp_size);
    const int row_pieces = g.rows_over_x ? g.X : g.Y, col_pieces = g.rows_over_x ? g.Y : g.X;
    MS_CHECK(local.ndim() == 2 && local[0] % ((g.glu ? 2 : 1) * row_pieces) == 0 &&
                 local[1] % col_pieces == 0,
             spec.name, ": shape ", local.to_string(), " does not divide over the ", g.X, " x ",
             g.Y, " tensor-parallel grid");
    MS_CHECK(spec.split_units == 0, spec.name, ": 2D splits are even");
    local = Shape{local[0] / row_pieces, local[1] / col_pieces};
  } else if (spec.split != TensorParallelSplit::kReplicated) {
    MS_CHECK(dim < local.ndim() && (dim == 0 || local.ndim() == 2), spec.name, ": no dimension ",
             dim, " to split");
    const int64_t length = glu ? local[0] / 2 : local[dim];
    if (spec.split_units > 0) {
      MS_CHECK(length % spec.split_units == 0 && (!glu || local[0] % 2 == 0), spec.name,
               ": dimension ", dim, " (", local[dim], ") is not ", spec.split_units,
               " equal units");
    } else {
      MS_CHECK((!glu || local[0] % 2 == 0) && length % tp_size == 0, spec.name, ": dimension ", dim,
               " (", local[dim], ") not divisible by ", glu ? 2 * tp_size : tp_size);
    }
    const int64_t mine = split_piece(spec, length, tp_rank, tp_size).length;
    local[dim] = glu ? 2 * mine : mine;
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
  if (spec.tp_axis == TensorParallelAxis::kX) return {ps.tp_x_rank, ps.sizes.tp_x};
  if (spec.tp_axis == TensorParallelAxis::kY) return {ps.tp_y_rank, ps.sizes.tp_y};
  return {ps.tp_rank, ps.sizes.tensor};
}

ParameterSpec one_d_equivalent(const ParameterSpec& spec) {
  ParameterSpec out = spec;
  out.tp_x = 0;
  out.tp_axis = TensorParallelAxis::kAll;
  out.grads_summed_over_tp_x = false;
  switch (spec.split) {
    case TensorParallelSplit::k2dRowsXColumnsY:
      out.split = TensorParallelSplit::kRows;
      break;
    case TensorParallelSplit::k2dGluRowsXColumnsY:
      out.split = TensorParallelSplit::kGluRows;
      break;
    case TensorParallelSplit::k2dRowsYColumnsX:
      out.split = TensorParallelSplit::kColumns;
      break;
    default:
      if (spec.tp_axis == TensorParallelAxis::kY) out.split = TensorParallelSplit::kReplicated;
      break;
  }
  return out;
}

bool holds_main_tp_copy(const ParameterSpec& spec, const ParallelState& ps) {
  if (spec.split == TensorParallelSplit::kReplicated) return ps.tp_rank == 0;
  if (spec.tp_axis == TensorParallelAxis::kX) return ps.tp_y_rank == 0;
  if (spec.tp_axis == TensorParallelAxis::kY) return ps.tp_x_rank == 0;
  return true;
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
    case TensorParallelSplit::kRows: {
      const SplitPiece mine = split_piece(spec, rows, tp_rank, tp_size);
      add_rows(mine.offset, mine.length);
      break;
    }
    case TensorParallelSplit::kGluRows: {
      const int64_t half = rows / 2;
      const SplitPiece mine = split_piece(spec, half, tp_rank, tp_size);
      add_rows(mine.offset, mine.length);
      add_rows(half + mine.offset, mine.length);
      break;
    }
    case TensorParallelSplit::kColumns: {
      const SplitPiece mine = split_piece(spec, width, tp_rank, tp_size);
      for (int64_t r = 0; r < rows; ++r) {
        runs.push_back({r, mine.offset, mine.offset + mine.length, r * mine.length});
      }
      break;
    }
    case TensorParallelSplit::k2dRowsXColumnsY:
    case TensorParallelSplit::k2dGluRowsXColumnsY:
    case TensorParallelSplit::k2dRowsYColumnsX: {
      const Grid2d g = grid_of(spec, tp_size);
      const int x = tp_rank % g.X, y = tp_rank / g.X;
      const int row_rank = g.rows_over_x ? x : y, row_pieces = g.rows_over_x ? g.X : g.Y;
      const int col_rank = g.rows_over_x ? y : x, col_pieces = g.rows_over_x ? g.Y : g.X;
      const int64_t cols = width / col_pieces, c0 = col_rank * cols;
      auto add_block = [&](int64_t first, int64_t count) {
        for (int64_t r = first; r < first + count; ++r) {
          runs.push_back({r, c0, c0 + cols, static_cast<int64_t>(runs.size()) * cols});
        }
      };
      if (g.glu) {
        const int64_t half = rows / 2, mine = half / row_pieces;
        add_block(row_rank * mine, mine);
        add_block(half + row_rank * mine, mine);
      } else {
        const int64_t mine = rows / row_pieces;
        add_block(row_rank * mine, mine);
      }
      break;
    }
  }
  return runs;
}

std::vector<ShardPlace> locate_in_shards(const ParameterSpec& spec, int tp_size, const ShardRun& run) {
  const Shape& g = spec.global_shape;
  const int64_t rows = g.ndim() > 0 ? g[0] : 1, width = g.ndim() > 1 ? g.numel() / g[0] : 1;
  const int64_t n = run.col_end - run.col_begin;
  // The rank whose piece of a split dimension of `length` holds index i, and the piece.
  auto owner = [&](int64_t length, int64_t i) {
    for (int t = 0; t < tp_size; ++t) {
      const SplitPiece piece = split_piece(spec, length, t, tp_size);
      if (i < piece.offset + piece.length) return std::pair<int, SplitPiece>{t, piece};
    }
    MS_CHECK(false, spec.name, ": index ", i, " outside its split dimension of ", length);
    return std::pair<int, SplitPiece>{};
  };
  switch (spec.split) {
    case TensorParallelSplit::kReplicated: return {{0, run.row * width + run.col_begin, n}};
    case TensorParallelSplit::kRows: {
      const auto [t, piece] = owner(rows, run.row);
      return {{t, (run.row - piece.offset) * width + run.col_begin, n}};
    }
    case TensorParallelSplit::kGluRows: {
      const int64_t half = rows / 2;
      const bool up = run.row >= half;
      const int64_t r = up ? run.row - half : run.row;
      const auto [t, piece] = owner(half, r);
      return {{t, ((up ? piece.length : 0) + r - piece.offset) * width + run.col_begin, n}};
    }
    case TensorParallelSplit::kColumns: {
      std::vector<ShardPlace> places;
      for (int64_t c = run.col_begin; c < run.col_end;) {
        const auto [t, piece] = owner(width, c);
        const int64_t end = std::min(run.col_end, piece.offset + piece.length);
        places.push_back({t, run.row * piece.length + (c - piece.offset), end - c});
        c = end;
      }
      return places;
    }
    case TensorParallelSplit::k2dRowsXColumnsY:
    case TensorParallelSplit::k2dGluRowsXColumnsY:
    case TensorParallelSplit::k2dRowsYColumnsX: {
      const Grid2d g = grid_of(spec, tp_size);
      const int row_pieces = g.rows_over_x ? g.X : g.Y, col_pieces = g.rows_over_x ? g.Y : g.X;
      // The row's piece and its place among the piece's local rows.
      int row_rank = 0;
      int64_t local_row = 0;
      if (g.glu) {
        const int64_t half = rows / 2, mine = half / row_pieces;
        const bool up = run.row >= half;
        const int64_t r = up ? run.row - half : run.row;
        row_rank = static_cast<int>(r / mine);
        local_row = (up ? mine : 0) + r % mine;
      } else {
        const int64_t mine = rows / row_pieces;
        row_rank = static_cast<int>(run.row / mine);
        local_row = run.row % mine;
      }
      const int64_t cols = width / col_pieces;
      std::vector<ShardPlace> places;
      for (int64_t c = run.col_begin; c < run.col_end;) {
        const int col_rank = static_cast<int>(c / cols);
        const int64_t end = std::min(run.col_end, (col_rank + 1) * cols);
        const int x = g.rows_over_x ? row_rank : col_rank, y = g.rows_over_x ? col_rank : row_rank;
        places.push_back({y * g.X + x, local_row * cols + (c - col_rank * cols), end - c});
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
