// The auto-settings search space (search_space.h).
#include "auto_settings/search_space.h"

#include "config/validate.h"

namespace mindspeed {
namespace {

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

bool power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

// The refusal's reason without the numbers: "--tensor-model-parallel-size must divide ...".
std::string reason_of(const Status& s) {
  std::string m = s.message();
  if (m.size() > 90) m = m.substr(0, 90) + "...";
  return m;
}

}  // namespace

SearchSpace enumerate_candidates(const Configs& base, int64_t vocab_size,
                                 const SearchLimits& limits) {
  SearchSpace space;
  const int world = limits.world_size;
  const bool moe = base.model.moe.num_experts > 0;
  const int64_t gbs = base.training.global_batch_size;
  for (int tp : divisors(world)) {
    if (tp > limits.ranks_per_node) continue;
    for (bool sp : tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
      for (int cp : divisors(world / tp)) {
        if (!power_of_two(cp) || cp > limits.max_context_parallel) continue;
        // (algorithm, Ulysses degree) pairs of this CP size.
        std::vector<std::pair<CpAlgo, int>> algos = {{CpAlgo::kRing, 1}};
        if (cp > 1) {
          algos.push_back({CpAlgo::kUlysses, 1});
          for (int u = 2; u < cp; u *= 2) algos.push_back({CpAlgo::kHybrid, u});
        }
        for (const auto& [algo, ulysses] : algos) {
          for (int pp : divisors(world / (tp * cp))) {
            if (pp > base.model.num_layers) continue;
            // Schedules: 1F1B (or none), interleaved with v chunks per rank, DualPipeV.
            std::vector<std::pair<int, bool>> schedules = {{0, false}};
            if (pp > 1) {
              for (int v = 2; v <= limits.max_virtual_stages; ++v) {
                if (base.model.num_layers % (static_cast<int64_t>(pp) * v) == 0)
                  schedules.push_back({v, false});
              }
              schedules.push_back({0, true});
            }
            const int dp = world / (tp * cp * pp);
            std::vector<int> eps = {1};
            if (moe) {
              eps.clear();
              for (int ep : divisors(dp * cp * tp)) {
                if (base.model.moe.num_experts % ep == 0) eps.push_back(ep);
              }
            }
            for (const auto& [vpp, dualpipev] : schedules) {
              for (int ep : eps) {
                for (int64_t mbs = 1; mbs <= limits.max_micro_batch_size; mbs *= 2) {
                  if (gbs > 0 && gbs % (mbs * dp) != 0) continue;
                  // Recompute: none, selective, full on every layer, and full on the first k
                  // layers of each stage or chunk (block; k = 1, 2, 4, ... below its layers).
                  const int64_t chunk_layers =
                      layers_per_model_chunk(base.model.num_layers, pp, vpp, dualpipev);
                  std::vector<std::pair<RecomputeChoice, int64_t>> recomputes = {
                      {RecomputeChoice::kNone, 0},
                      {RecomputeChoice::kSelective, 0},
                      {RecomputeChoice::kFull, 0}};
                  for (int64_t k = 1; k < chunk_layers; k *= 2)
                    recomputes.push_back({RecomputeChoice::kFull, k});
                  for (const auto& [rc, recompute_layers] : recomputes) {
                    for (bool distopt :
                         dp* cp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
                      Candidate c{.tp = tp,
                                  .sp = sp,
                                  .pp = pp,
                                  .vpp = vpp,
                                  .dualpipev = dualpipev,
                                  .cp = cp,
                                  .cp_algo = algo,
                                  .ulysses_degree = ulysses,
                                  .ep = ep,
                                  .mbs = mbs,
                                  .recompute = rc,
                                  .recompute_layers = recompute_layers,
                                  .distributed_optimizer = distopt};
                      ++space.considered;
                      Configs configs = base;
                      apply_candidate(c, configs);
                      configs.auto_settings = AutoSettingsConfig{};
                      const Status s = validate_configs(configs, world, vocab_size);
                      if (!s.ok()) {
                        ++space.refusals[reason_of(s)];
                        continue;
                      }
                      space.legal.push_back({c, std::move(configs)});
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return space;
}

}  // namespace mindspeed
