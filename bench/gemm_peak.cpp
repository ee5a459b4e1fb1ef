// The machine's compute peaks that MFU is measured against: the FMA peak (register-only
// FMA chains, every thread) and the BLAS SGEMM peak (the best of a few large row-major
// products, the shapes of the benchmark models' linear layers), with 1 and all threads.
// Prints one JSON line per measurement. Built once against OpenBLAS (gemm_peak) and, when
// Debian's BLIS is installed, once against BLIS (gemm_peak_blis), to compare the two.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double fma_peak_gflops(int threads) {
#if defined(__AVX2__) && defined(__FMA__)
  const long iters = 50'000'000;
  const double t0 = now();
  float sink = 0.0f;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  {
    __m256 b = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(0.001f);
    __m256 a0 = _mm256_set1_ps(0), a1 = _mm256_set1_ps(1), a2 = _mm256_set1_ps(2), a3 = _mm256_set1_ps(3),
           a4 = _mm256_set1_ps(4), a5 = _mm256_set1_ps(5), a6 = _mm256_set1_ps(6), a7 = _mm256_set1_ps(7),
           a8 = _mm256_set1_ps(8), a9 = _mm256_set1_ps(9);
    for (long i = 0; i < iters; ++i) {
      a0 = _mm256_fmadd_ps(a0, b, c); a1 = _mm256_fmadd_ps(a1, b, c); a2 = _mm256_fmadd_ps(a2, b, c);
      a3 = _mm256_fmadd_ps(a3, b, c); a4 = _mm256_fmadd_ps(a4, b, c); a5 = _mm256_fmadd_ps(a5, b, c);
      a6 = _mm256_fmadd_ps(a6, b, c); a7 = _mm256_fmadd_ps(a7, b, c); a8 = _mm256_fmadd_ps(a8, b, c);
      a9 = _mm256_fmadd_ps(a9, b, c);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(_mm256_add_ps(a6, a7), _mm256_add_ps(a8, a9))));
    float tmp[8];
    _mm256_storeu_ps(tmp, s);
    sink += tmp[0];
  }
  const double t = now() - t0;
  if (sink == 12345.0f) std::printf(" ");
  return static_cast<double>(iters) * 10 * 16 * threads / t / 1e9;
#else
  (void)threads;
  return 0.0;
#endif
}

double sgemm_gflops(int M, int N, int K, bool trans_b) {
  std::vector<float> A(static_cast<size_t>(M) * K), B(static_cast<size_t>(K) * N), C(static_cast<size_t>(M) * N);
  for (size_t i = 0; i < A.size(); ++i) A[i] = 0.001f * static_cast<float>(i % 97);
  for (size_t i = 0; i < B.size(); ++i) B[i] = 0.002f * static_cast<float>(i % 89);
  auto run = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A.data(), K,
                B.data(), trans_b ? K : N, 0.0f, C.data(), N);
  };
  run();
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    const double t0 = now();
    run();
    best = std::min(best, now() - t0);
  }
  return 2.0 * M * N * K / best / 1e9;
}

}  // namespace

int main() {
  const int all = omp_get_max_threads();
  for (int threads : {1, all}) {
    if (threads == 1 && all == 1 && threads != all) continue;
    std::printf("{\"measure\": \"fma_peak\", \"threads\": %d, \"gflops\": %.1f}\n", threads, fma_peak_gflops(threads));
    omp_set_num_threads(threads);
#ifdef MS_BLAS_NAME
    const char* blas = MS_BLAS_NAME;
#else
    const char* blas = "openblas";
#endif
    const int shapes[][3] = {{4096, 768, 768}, {4096, 2304, 768}, {4096, 3072, 768}, {4096, 768, 3072},
                             {2048, 2048, 2048}, {1024, 50304, 768}};
    double best = 0.0;
    for (const auto& s : shapes) {
      const double g = sgemm_gflops(s[0], s[1], s[2], true);
      best = std::max(best, g);
      std::printf("{\"measure\": \"sgemm\", \"blas\": \"%s\", \"threads\": %d, \"m\": %d, \"n\": %d, \"k\": %d, \"gflops\": %.1f}\n",
                  blas, threads, s[0], s[1], s[2], g);
    }
    std::printf("{\"measure\": \"sgemm_peak\", \"blas\": \"%s\", \"threads\": %d, \"gflops\": %.1f}\n", blas, threads, best);
    std::fflush(stdout);
  }
  return 0;
}
