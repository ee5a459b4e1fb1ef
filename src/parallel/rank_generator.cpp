// RankGenerator and the group layout (rank_generator.h).
#include "parallel/rank_generator.h"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <utility>

#include "config/parallel_config.h"
#include "core/check.h"

namespace mindspeed {
namespace {

std::vector<int> prefix_product(const std::vector<int>& a) {
  std::vector<int> r{1};
  for (int v : a) r.push_back(r.back() * v);
  return r;
}

std::vector<int> decompose(int index, const std::vector<int>& shape) {
  const std::vector<int> stride = prefix_product(shape);
  std::vector<int> idx(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) idx[i] = (index / stride[i]) % shape[i];
  return idx;
}

std::vector<std::string> split_order(const std::string& order) {
  std::vector<std::string> out;
  std::stringstream ss(order);
  std::string token;
  while (std::getline(ss, token, '-')) out.push_back(token);
  return out;
}

}  // namespace

RankGroups masked_orthogonal_rank_groups(int world_size, const std::vector<int>& sizes,
                                         const std::vector<bool>& mask) {
  MS_CHECK(mask.size() == sizes.size(), "masked_orthogonal_rank_groups: ", mask.size(), " mask entries for ",
           sizes.size(), " sizes");
  for (int size : sizes) MS_CHECK(size >= 1, "masked_orthogonal_rank_groups: a parallel size is ", size);
  std::vector<int> masked_shape, unmasked_shape, masked_stride, unmasked_stride;
  const std::vector<int> global_stride = prefix_product(sizes);
  for (size_t i = 0; i < sizes.size(); ++i) {
    (mask[i] ? masked_shape : unmasked_shape).push_back(sizes[i]);
    (mask[i] ? masked_stride : unmasked_stride).push_back(global_stride[i]);
  }
  const int group_size = prefix_product(masked_shape).back();
  const int num_groups = world_size / group_size;
  RankGroups groups;
  for (int g = 0; g < num_groups; ++g) {
    const std::vector<int> gidx = decompose(g, unmasked_shape);
    const int base = std::inner_product(gidx.begin(), gidx.end(), unmasked_stride.begin(), 0);
    std::vector<int> ranks;
    for (int r = 0; r < group_size; ++r) {
      const std::vector<int> ridx = decompose(r, masked_shape);
      ranks.push_back(base + std::inner_product(ridx.begin(), ridx.end(), masked_stride.begin(), 0));
    }
    groups.push_back(std::move(ranks));
  }
  return groups;
}

StatusOr<RankGenerator> RankGenerator::create(int tp, int ep, int dp, int pp, int cp, std::string order) {
  for (const auto& [name, size] : {std::pair<const char*, int>{"tp", tp}, {"ep", ep}, {"dp", dp}, {"pp", pp},
                                   {"cp", cp}}) {
    if (size < 1) return invalid_argument("RankGenerator: ", name, " size is ", size, ", expected at least 1");
  }
  RankGenerator g;
  g.sizes_ = {{"tp", tp}, {"pp", pp}, {"dp", dp}, {"ep", ep}, {"cp", cp}};
  g.world_size_ = tp * ep * dp * pp * cp;
  auto tokens = split_order(order);
  for (const std::string& t : tokens) {
    if (!g.sizes_.contains(t)) return invalid_argument("unknown token '", t, "' in order '", order, "'");
  }
  for (const char* name : {"tp", "pp", "dp", "ep", "cp"}) {
    if (std::find(tokens.begin(), tokens.end(), name) != tokens.end()) continue;
    if (g.sizes_[name] != 1) {
      return invalid_argument("order '", order, "' lacks '", name, "' whose size is ", g.sizes_[name]);
    }
    order += std::string("-") + name;
    tokens.push_back(name);
  }
  g.order_ = order;
  g.ordered_ = tokens;
  for (const std::string& t : tokens) g.ordered_sizes_.push_back(g.sizes_[t]);
  return g;
}

RankGroups RankGenerator::get_ranks(const std::string& tokens) const {
  std::vector<bool> mask(ordered_.size(), false);
  for (const std::string& t : split_order(tokens)) {
    const auto it = std::find(ordered_.begin(), ordered_.end(), t);
    if (it != ordered_.end()) mask[it - ordered_.begin()] = true;
  }
  return masked_orthogonal_rank_groups(world_size_, ordered_sizes_, mask);
}

ParallelLayout parallel_layout(const ParallelConfig& config, int world_size) {
  ParallelLayout layout;
  layout.world_size = world_size;
  layout.tp = config.tensor_model_parallel_size;
  layout.pp = config.pipeline_model_parallel_size;
  layout.cp = config.context_parallel_size;
  layout.ep = config.expert_model_parallel_size;
  layout.etp = config.expert_tensor_parallel_size;
  if (config.moe_tp_extend_ep) {  // MindSpeed: whole experts over the tp x ep ranks
    layout.ep *= layout.tp;
    layout.etp = 1;
  }
  layout.cp_ulysses = config.cp.ulysses_degree;
  layout.tp_pp_dp_order = config.use_tp_pp_dp_mapping;
  if (config.tp_2d) layout.tp_x = config.tp_x;
  return layout;
}

namespace {
// `ranks` (size a multiple of u) as runs of u consecutive members (appended to runs) and as u
// groups of every u-th member (appended to strides): hybrid CP's Ulysses and ring groups, 2D
// tensor parallelism's X and Y groups.
void split_into_runs_and_strides(const std::vector<int>& ranks, int u, RankGroups* runs,
                                 RankGroups* strides) {
  const size_t n = static_cast<size_t>(u);
  for (size_t m = 0; m < ranks.size(); m += n) {
    runs->emplace_back(ranks.begin() + static_cast<std::ptrdiff_t>(m),
                       ranks.begin() + static_cast<std::ptrdiff_t>(m + n));
  }
  for (size_t m = 0; m < n; ++m) {
    std::vector<int> every;
    for (size_t i = m; i < ranks.size(); i += n) every.push_back(ranks[i]);
    strides->push_back(std::move(every));
  }
}
}  // namespace

StatusOr<ParallelGroups> build_parallel_groups(const ParallelLayout& l) {
  if (l.world_size < 1) return invalid_argument("world size is ", l.world_size, ", expected at least 1");
  for (const auto& [flag, size] : {std::pair<const char*, int>{"--tensor-model-parallel-size", l.tp},
                                   {"--pipeline-model-parallel-size", l.pp},
                                   {"--context-parallel-size", l.cp},
                                   {"--expert-model-parallel-size", l.ep}}) {
    if (size < 1) return invalid_argument(flag, " is ", size, ", expected at least 1");
  }
  if (l.etp < 0) {
    return invalid_argument("expert tensor-parallel size is ", l.etp, ", expected >= 0 (0 = same as tensor)");
  }
  const int model = l.tp * l.pp * l.cp;
  if (l.world_size % model != 0) {
    return invalid_argument("world size (", l.world_size, ") is not divisible by tensor (", l.tp,
                            ") x pipeline (", l.pp, ") x context (", l.cp, ") parallel sizes = ", model);
  }
  const int dp = l.world_size / model;
  const int etp = l.etp > 0 ? l.etp : l.tp;
  if (l.world_size % (etp * l.ep * l.pp) != 0) {
    return invalid_argument("world size (", l.world_size, ") is not divisible by expert tensor (", etp,
                            ") x expert (", l.ep, ") x pipeline (", l.pp, ") parallel sizes");
  }
  const int edp = l.world_size / (etp * l.ep * l.pp);
  const std::string order = l.tp_pp_dp_order ? "tp-cp-ep-pp-dp" : "tp-cp-ep-dp-pp";
  MS_ASSIGN_OR_RETURN(RankGenerator dense, RankGenerator::create(l.tp, 1, dp, l.pp, l.cp, order));
  MS_ASSIGN_OR_RETURN(RankGenerator expert, RankGenerator::create(etp, l.ep, edp, l.pp, 1, order));
  ParallelGroups out;
  auto& g = out.groups;
  g["dp"] = dense.get_ranks("dp");
  g["dp-cp"] = dense.get_ranks("dp-cp");
  g["cp"] = dense.get_ranks("cp");
  g["mp"] = dense.get_ranks("tp-pp");
  g["tp"] = dense.get_ranks("tp");
  g["pp"] = dense.get_ranks("pp");
  g["tp-dp-cp"] = dense.get_ranks("tp-dp-cp");
  g["tp-dp"] = dense.get_ranks("tp-dp");
  g["tp-cp"] = dense.get_ranks("tp-cp");
  if (l.cp_ulysses < 1 || l.cp % l.cp_ulysses != 0) {
    return invalid_argument("the Ulysses degree (", l.cp_ulysses, ") must divide the context-parallel size (", l.cp,
                            ")");
  }
  // MindSpeed's initialize_context_parallel_group_for_hybrid_cp.
  for (const std::vector<int>& cp_ranks : g["cp"]) {
    split_into_runs_and_strides(cp_ranks, l.cp_ulysses, &g["cp-ulysses"], &g["cp-ring"]);
  }
  if (l.tp_x > 0) {
    if (l.tp % l.tp_x != 0) {
      return invalid_argument("--tp-x (", l.tp_x, ") must divide --tensor-model-parallel-size (",
                              l.tp, ")");
    }
    // MindSpeed's initialize_ndmm_parallel_group: X = runs of tp_x consecutive ranks of a tp
    // group, Y = every tp_x-th rank; TensorParallelYUnionCP: for each cp group in cp order, the
    // Y group of each member (the members' tp ranks share x).
    for (const std::vector<int>& tp_ranks : g["tp"]) {
      split_into_runs_and_strides(tp_ranks, l.tp_x, &g["tp-x"], &g["tp-y"]);
    }
    std::map<int, std::vector<int>> y_of;  // rank -> its Y group
    for (const std::vector<int>& y : g["tp-y"])
      for (int r : y) y_of[r] = y;
    for (const std::vector<int>& cp_ranks : g["cp"]) {
      std::vector<int> united;
      for (int r : cp_ranks) united.insert(united.end(), y_of[r].begin(), y_of[r].end());
      if (std::find(g["tp-y-cp"].begin(), g["tp-y-cp"].end(), united) == g["tp-y-cp"].end()) {
        g["tp-y-cp"].push_back(std::move(united));
      }
    }
  }
  RankGroups embedding, position_embedding;
  for (const auto& pp : g["pp"]) {
    embedding.push_back(pp.size() > 1 ? std::vector<int>{pp.front(), pp.back()} : std::vector<int>{pp.front()});
    position_embedding.push_back({pp.front()});
  }
  g["embedding"] = embedding;
  g["position-embedding"] = position_embedding;
  g["ep"] = expert.get_ranks("ep");
  g["expert-tp"] = expert.get_ranks("tp");
  g["tp-ep"] = expert.get_ranks("tp-ep");
  g["tp-ep-pp"] = expert.get_ranks("tp-ep-pp");
  g["expert-dp"] = expert.get_ranks("dp");
  if (expert.get_ranks("pp") != g["pp"]) {
    return invalid_argument("the pipeline groups of the dense and expert layouts differ; check "
                            "--expert-model-parallel-size against the other sizes");
  }
  return out;
}

std::string format_parallel_groups(const ParallelLayout& l, const ParallelGroups& groups) {
  std::ostringstream out;
  const int model = l.tp * l.pp * l.cp;
  const int dp = model > 0 ? l.world_size / model : 0;
  out << "world " << l.world_size << ": tp " << l.tp << ", pp " << l.pp << ", cp " << l.cp << ", ep " << l.ep
      << ", dp " << dp << " (order " << (l.tp_pp_dp_order ? "tp-cp-ep-pp-dp" : "tp-cp-ep-dp-pp") << ")\n";
  for (const char* name : {"tp",
                           "cp",
                           "cp-ulysses",
                           "cp-ring",
                           "dp",
                           "dp-cp",
                           "pp",
                           "mp",
                           "tp-cp",
                           "tp-dp",
                           "tp-dp-cp",
                           "embedding",
                           "position-embedding",
                           "ep",
                           "expert-tp",
                           "tp-ep",
                           "tp-ep-pp",
                           "expert-dp",
                           "tp-x",
                           "tp-y",
                           "tp-y-cp"}) {
    if (l.tp_x == 0 && std::string(name).starts_with("tp-x")) continue;
    if (l.tp_x == 0 && std::string(name).starts_with("tp-y")) continue;
    const auto found = groups.groups.find(name);
    if (found == groups.groups.end()) {
      out << "  " << name << ": (not built)\n";
      continue;
    }
    const RankGroups& gs = found->second;
    out << "  " << name << " (" << gs.size() << " groups of " << (gs.empty() ? 0 : gs.front().size()) << "):";
    for (const auto& grp : gs) {
      out << " [";
      for (size_t i = 0; i < grp.size(); ++i) out << (i ? "," : "") << grp[i];
      out << "]";
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace mindspeed
