// The grouped GEMM kernels (ref/ and cpu/) against a loop of plain per-group GEMMs
// (gemm_reference, the double-accumulating specification of kernels/blas/gemm.h): empty
// groups first, in the middle, last and everywhere, groups of one row, N and K that are not
// multiples of the vector width, many small groups (the cpu kernel's side-by-side schedule)
// and one dominant group (its all-threads GEMM); dw accumulates onto what is there and an
// empty group leaves its dw untouched; dx and dw by finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "grad_check.h"
#include "kernels/blas/gemm.h"
#include "kernels/kernels.h"
#include "test_util.h"

namespace mindspeed {
namespace {
using testing::all_close;
using testing::check_gradient;
using testing::kKc;
using testing::random_vector;

struct Impl {
  const char* name;
  decltype(&ref::grouped_gemm_forward) forward;
  decltype(&ref::grouped_gemm_backward_input) backward_input;
  decltype(&ref::grouped_gemm_backward_weight) backward_weight;
};
const Impl kImpls[] = {
    {"ref", ref::grouped_gemm_forward, ref::grouped_gemm_backward_input,
     ref::grouped_gemm_backward_weight},
    {"cpu", cpu::grouped_gemm_forward, cpu::grouped_gemm_backward_input,
     cpu::grouped_gemm_backward_weight},
};

struct Case {
  std::string name;
  std::vector<int64_t> counts;
  int64_t N, K;
};

std::vector<Case> cases() {
  return {
      {"first empty", {0, 5, 3, 7}, 13, 11},
      {"middle empty, one-row group", {4, 0, 6, 1}, 13, 11},
      {"last empty", {3, 2, 5, 0}, 9, 17},
      {"all empty", {0, 0, 0}, 13, 11},
      {"one row each", {1, 1, 1, 1, 1, 1, 1, 1}, 7, 5},
      {"single group", {37}, 33, 19},
      {"skewed", {40, 1, 2, 0, 3, 1}, 21, 10},
      {"many equal", std::vector<int64_t>(12, 4), 15, 9},
      {"wide", {2, 0, 70, 9}, 70, 65},
  };
}

int64_t total_rows(const std::vector<int64_t>& counts) {
  int64_t m = 0;
  for (int64_t c : counts) m += c;
  return m;
}

// G separate expert weights [N, K] (one parameter each), as pointers for the kernels:
// normal random from Philox streams stream, stream + 1, ... or every element `Fill`.
struct Fill {
  float value;
};
struct Weights {
  std::vector<std::vector<float>> w;
  std::vector<const float*> ptrs;
  std::vector<float*> mutable_ptrs;
  Weights(int64_t G, int64_t N, int64_t K, uint64_t stream) {
    for (int64_t g = 0; g < G; ++g) w.push_back(random_vector(N * K, stream + g));
    set_pointers();
  }
  Weights(int64_t G, int64_t N, int64_t K, Fill fill) {
    for (int64_t g = 0; g < G; ++g) w.push_back(std::vector<float>(N * K, fill.value));
    set_pointers();
  }
  Weights(const Weights&) = delete;
  void set_pointers() {
    for (auto& v : w) {
      ptrs.push_back(v.data());
      mutable_ptrs.push_back(v.data());
    }
  }
  // All weights in one flat vector (for finite differences) and back.
  std::vector<float> flat() const {
    std::vector<float> f;
    for (const auto& v : w) f.insert(f.end(), v.begin(), v.end());
    return f;
  }
  void set_flat(const std::vector<float>& f) {
    size_t at = 0;
    for (auto& v : w) {
      std::memcpy(v.data(), f.data() + at, sizeof(float) * v.size());
      at += v.size();
    }
  }
};

const float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(GroupedGemm, ForwardMatchesPerGroupGemm) {
  for (const Case& c : cases()) {
    const int64_t G = static_cast<int64_t>(c.counts.size()), M = total_rows(c.counts);
    const auto x = random_vector(M * c.K, 1);
    const Weights w(G, c.N, c.K, 100);
    std::vector<float> expected(M * c.N);
    int64_t row = 0;
    for (int64_t g = 0; g < G; ++g) {
      gemm_reference(false, true, c.counts[g], c.N, c.K, 1.0f, x.data() + row * c.K, c.K, w.ptrs[g],
                     c.K, 0.0f, expected.data() + row * c.N, c.N);
      row += c.counts[g];
    }
    for (const Impl& impl : kImpls) {
      std::vector<float> out(M * c.N, kNaN);  // "=": every element must be written
      impl.forward(kKc, out.data(), x.data(), w.ptrs.data(), c.counts.data(), G, c.N, c.K);
      EXPECT_TRUE(all_close(out, expected, 1e-5, 1e-5)) << impl.name << ", " << c.name;
    }
  }
}

TEST(GroupedGemm, BackwardInputMatchesPerGroupGemm) {
  for (const Case& c : cases()) {
    const int64_t G = static_cast<int64_t>(c.counts.size()), M = total_rows(c.counts);
    const auto dout = random_vector(M * c.N, 2);
    const Weights w(G, c.N, c.K, 200);
    std::vector<float> expected(M * c.K);
    int64_t row = 0;
    for (int64_t g = 0; g < G; ++g) {
      gemm_reference(false, false, c.counts[g], c.K, c.N, 1.0f, dout.data() + row * c.N, c.N,
                     w.ptrs[g], c.K, 0.0f, expected.data() + row * c.K, c.K);
      row += c.counts[g];
    }
    for (const Impl& impl : kImpls) {
      std::vector<float> dx(M * c.K, kNaN);
      impl.backward_input(kKc, dx.data(), dout.data(), w.ptrs.data(), c.counts.data(), G, c.N, c.K);
      EXPECT_TRUE(all_close(dx, expected, 1e-5, 1e-5)) << impl.name << ", " << c.name;
    }
  }
}

TEST(GroupedGemm, BackwardWeightAccumulatesAndSkipsEmptyGroups) {
  for (const Case& c : cases()) {
    const int64_t G = static_cast<int64_t>(c.counts.size()), M = total_rows(c.counts);
    const auto dout = random_vector(M * c.N, 3), x = random_vector(M * c.K, 4);
    const Weights before(G, c.N, c.K, 300);  // non-zero gradient already in the buffer
    Weights expected(G, c.N, c.K, 300);
    int64_t row = 0;
    for (int64_t g = 0; g < G; ++g) {
      gemm_reference(true, false, c.N, c.K, c.counts[g], 1.0f, dout.data() + row * c.N, c.N,
                     x.data() + row * c.K, c.K, 1.0f, expected.mutable_ptrs[g], c.K);
      row += c.counts[g];
    }
    for (const Impl& impl : kImpls) {
      Weights dw(G, c.N, c.K, 300);
      impl.backward_weight(kKc, dw.mutable_ptrs.data(), dout.data(), x.data(), c.counts.data(), G,
                           c.N, c.K);
      for (int64_t g = 0; g < G; ++g) {
        EXPECT_TRUE(all_close(dw.w[g], expected.w[g], 1e-5, 1e-5))
            << impl.name << ", " << c.name << ", group " << g;
        if (c.counts[g] == 0) {
          EXPECT_EQ(dw.w[g], before.w[g]) << impl.name << ", " << c.name << ", empty group " << g;
        }
      }
    }
  }
}

// The cpu kernel schedules groups differently with the thread count; each output element is
// still one group's GEMM.
TEST(GroupedGemm, CpuScheduleDoesNotDependOnThreadCount) {
  const std::vector<int64_t> counts = {50, 3, 0, 9, 9, 9, 2, 1, 30, 0, 4};
  const int64_t G = static_cast<int64_t>(counts.size()), M = total_rows(counts), N = 23, K = 31;
  const auto x = random_vector(M * K, 5), dout = random_vector(M * N, 6);
  const Weights w(G, N, K, 400);
  std::vector<float> out1(M * N), dx1(M * K);
  Weights dw1(G, N, K, Fill{0.5f});
  for (int threads : {1, 2, 3, 8}) {
    const KernelContext kc{threads};
    std::vector<float> out(M * N), dx(M * K);
    Weights dw(G, N, K, Fill{0.5f});
    cpu::grouped_gemm_forward(kc, out.data(), x.data(), w.ptrs.data(), counts.data(), G, N, K);
    cpu::grouped_gemm_backward_input(kc, dx.data(), dout.data(), w.ptrs.data(), counts.data(), G, N,
                                     K);
    cpu::grouped_gemm_backward_weight(kc, dw.mutable_ptrs.data(), dout.data(), x.data(),
                                      counts.data(), G, N, K);
    if (threads == 1) {
      out1 = out, dx1 = dx, dw1.set_flat(dw.flat());
      continue;
    }
    EXPECT_TRUE(all_close(out, out1, 1e-6, 1e-6)) << threads << " threads";
    EXPECT_TRUE(all_close(dx, dx1, 1e-6, 1e-6)) << threads << " threads";
    EXPECT_TRUE(all_close(dw.flat(), dw1.flat(), 1e-6, 1e-6)) << threads << " threads";
  }
}

TEST(GroupedGemm, GradientsByFiniteDifferences) {
  const std::vector<int64_t> counts = {2, 0, 3, 1};
  const int64_t G = static_cast<int64_t>(counts.size()), M = total_rows(counts), N = 5, K = 7;
  const auto x = random_vector(M * K, 7), dout = random_vector(M * N, 8);
  const Weights w(G, N, K, 500);
  for (const Impl& impl : kImpls) {
    std::vector<float> dx(M * K);
    Weights dw(G, N, K, Fill{0.0f});
    impl.backward_input(kKc, dx.data(), dout.data(), w.ptrs.data(), counts.data(), G, N, K);
    impl.backward_weight(kKc, dw.mutable_ptrs.data(), dout.data(), x.data(), counts.data(), G, N,
                         K);
    auto forward = [&](const std::vector<float>& xx, const Weights& ww) {
      std::vector<float> out(M * N);
      impl.forward(kKc, out.data(), xx.data(), ww.ptrs.data(), counts.data(), G, N, K);
      return out;
    };
    EXPECT_TRUE(check_gradient([&](const auto& v) { return forward(v, w); }, x, dout, dx))
        << impl.name << " dx";
    Weights perturbed(G, N, K, Fill{0.0f});
    EXPECT_TRUE(check_gradient(
        [&](const auto& v) {
          perturbed.set_flat(v);
          return forward(x, perturbed);
        },
        w.flat(), dout, dw.flat(), 1e-2, 2e-2, 2e-3, /*max_coords=*/G * N * K))
        << impl.name << " dw";
  }
}

}  // namespace
}  // namespace mindspeed
