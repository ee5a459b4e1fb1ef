// The CUDA elementwise, conversion, layout and check kernels against their references
// (ref/elementwise.cpp, ref/moe_permute.cpp's scale_rows) on sizes that are not multiples of a
// block: the 16-bit conversions bit for bit (the same core/dtype.h functions on the device),
// special values included; sums within their reassociation.
#include <cstring>

#include "cuda_test_util.h"

namespace mindspeed {
namespace {

using testing::all_close;
using testing::CudaKernelTest;
using testing::DeviceBuffer;
using testing::kRefKc;
using testing::poisoned;
using testing::random_vector;

constexpr int64_t kSizes[] = {1, 31, 257, 100003};

// Random values with the special ones 16-bit conversions must get right.
std::vector<float> with_special_values(int64_t n, uint64_t stream) {
  std::vector<float> v = random_vector(n, stream, 3.0f);
  const float special[] = {0.0f,     -0.0f,    INFINITY, -INFINITY, NAN,
                           65504.0f, 65520.0f, 1e-8f,    -3e-39f,   1.0009765625f};
  for (size_t i = 0; i < std::size(special) && i < v.size(); ++i) v[i * 7 % v.size()] = special[i];
  return v;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

TEST_F(CudaKernelTest, ArithmeticEqualsTheReference) {
  for (const int64_t n : kSizes) {
    SCOPED_TRACE(n);
    const auto x = random_vector(n, 1), y = random_vector(n, 2);
    DeviceBuffer<float> dx(x), dy(y);
    std::vector<float> want = y;
    ref::add_inplace(kRefKc, want.data(), x.data(), n);
    k().add_inplace(kc(), dy, dx, n);
    EXPECT_EQ(dy.download(), want);
    ref::scale_inplace(kRefKc, want.data(), 0.37f, n);
    k().scale_inplace(kc(), dy, 0.37f, n);
    EXPECT_EQ(dy.download(), want);
    auto out = poisoned<float>(n);
    std::vector<float> scaled(n);
    ref::scale_copy(kRefKc, scaled.data(), x.data(), -1.5f, n);
    k().scale_copy(kc(), out, dx, -1.5f, n);
    EXPECT_EQ(out.download(), scaled);
    k().copy(kc(), out, dx, n);
    EXPECT_EQ(out.download(), x);
    k().fill_zero(kc(), out, n);
    EXPECT_EQ(out.download(), std::vector<float>(n, 0.0f));
    std::vector<float> filled(n);
    ref::fill(kRefKc, filled.data(), -INFINITY, n);
    k().fill(kc(), out, -INFINITY, n);
    EXPECT_EQ(out.download(), filled);
  }
}

TEST_F(CudaKernelTest, StridedBlockCopyEqualsTheReference) {
  // (rows, width, out_stride, in_stride): one row (a plain copy), odd widths and strides.
  const int64_t shapes[][4] = {
      {1, 257, 257, 257}, {7, 13, 21, 17}, {300, 31, 64, 31}, {33, 1, 5, 3}};
  for (const auto& s : shapes) {
    const int64_t rows = s[0], width = s[1], out_stride = s[2], in_stride = s[3];
    SCOPED_TRACE(::testing::Message()
                 << rows << "x" << width << " strides " << out_stride << "/" << in_stride);
    const auto in = random_vector(rows * in_stride, 21);
    DeviceBuffer<float> din(in);
    // The gaps between the blocks keep their poison: the reference starts from the same bytes.
    auto out = poisoned<float>(rows * out_stride);
    std::vector<float> want = out.download();
    ref::copy_2d(kRefKc, want.data(), in.data(), rows, width, out_stride, in_stride);
    k().copy_2d(kc(), out, din, rows, width, out_stride, in_stride);
    EXPECT_TRUE(same_bits(out.download(), want));
  }
}

TEST_F(CudaKernelTest, SixteenBitConversionsAreBitExact) {
  for (const int64_t n : kSizes) {
    SCOPED_TRACE(n);
    const auto x = with_special_values(n, 3), acc_seed = random_vector(n, 4, 2.0f);
    DeviceBuffer<float> dx(x);
    // bf16
    std::vector<bf16> want_bf(n), acc_bf(n);
    ref::convert_to_bf16(kRefKc, want_bf.data(), x.data(), n);
    auto got_bf = poisoned<bf16>(n);
    k().convert_to_bf16(kc(), got_bf, dx, n);
    EXPECT_TRUE(same_bits(got_bf.download(), want_bf));
    std::vector<float> widened(n);
    ref::convert_to_fp32(kRefKc, widened.data(), want_bf.data(), n);
    auto got_wide = poisoned<float>(n);
    k().convert_to_fp32(kc(), got_wide, got_bf, n);
    EXPECT_TRUE(same_bits(got_wide.download(), widened));
    std::vector<float> rounded = x;
    ref::round_to_bf16(kRefKc, rounded.data(), n);
    DeviceBuffer<float> dr(x);
    k().round_to_bf16(kc(), dr, n);
    EXPECT_TRUE(same_bits(dr.download(), rounded));
    ref::convert_to_bf16(kRefKc, acc_bf.data(), acc_seed.data(), n);
    DeviceBuffer<bf16> dacc(acc_bf);
    ref::add_into_bf16(kRefKc, acc_bf.data(), x.data(), n);
    k().add_into_bf16(kc(), dacc, dx, n);
    EXPECT_TRUE(same_bits(dacc.download(), acc_bf));
    // fp16
    std::vector<fp16> want_h(n), acc_h(n);
    ref::convert_to_fp16(kRefKc, want_h.data(), x.data(), n);
    auto got_h = poisoned<fp16>(n);
    k().convert_to_fp16(kc(), got_h, dx, n);
    EXPECT_TRUE(same_bits(got_h.download(), want_h));
    ref::convert_fp16_to_fp32(kRefKc, widened.data(), want_h.data(), n);
    k().convert_fp16_to_fp32(kc(), got_wide, got_h, n);
    EXPECT_TRUE(same_bits(got_wide.download(), widened));
    rounded = x;
    ref::round_to_fp16(kRefKc, rounded.data(), n);
    dr.upload(x);
    k().round_to_fp16(kc(), dr, n);
    EXPECT_TRUE(same_bits(dr.download(), rounded));
    ref::convert_to_fp16(kRefKc, acc_h.data(), acc_seed.data(), n);
    DeviceBuffer<fp16> dacc_h(acc_h);
    ref::add_into_fp16(kRefKc, acc_h.data(), x.data(), n);
    k().add_into_fp16(kc(), dacc_h, dx, n);
    EXPECT_TRUE(same_bits(dacc_h.download(), acc_h));
  }
}

// The transfers: pageable and pinned host memory to the device and back, device to device;
// the host buffer may be overwritten as soon as copy_to_device returns.
TEST_F(CudaKernelTest, TransfersBetweenHostAndDevice) {
  const int64_t n = 100003;
  std::vector<float> x = random_vector(n, 11);
  const std::vector<float> want = x;
  auto device = poisoned<float>(n), other = poisoned<float>(n);
  k().copy_to_device(kc(), device, x.data(), n * 4);
  std::fill(x.begin(), x.end(), 0.0f);
  k().copy_bytes(kc(), other, device, n * 4);
  std::vector<float> back(n, NAN);
  k().copy_to_host(kc(), back.data(), other, n * 4);
  EXPECT_EQ(back, want);
  float* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), n * 4), cudaSuccess);
  std::copy(want.begin(), want.end(), pinned);
  auto from_pinned = poisoned<float>(n);
  k().copy_to_device(kc(), from_pinned, pinned, n * 4);
  std::fill(pinned, pinned + n, 0.0f);
  k().copy_to_host(kc(), back.data(), from_pinned, n * 4);
  EXPECT_EQ(back, want);
  k().synchronize(kc());
  cudaFreeHost(pinned);
}

TEST_F(CudaKernelTest, TransposeAndScaleRows) {
  const int64_t D0 = 7, D1 = 13, C = 33;
  const auto x = random_vector(D0 * D1 * C, 5);
  std::vector<float> want(x.size());
  ref::transpose_01_f32(kRefKc, want.data(), x.data(), D0, D1, C);
  DeviceBuffer<float> dx(x);
  auto out = poisoned<float>(x.size());
  k().transpose_01_f32(kc(), out, dx, D0, D1, C);
  EXPECT_EQ(out.download(), want);
  std::vector<int32_t> ids(x.size()), want_ids(x.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i * 2654435761u % 50000);
  ref::transpose_01_i32(kRefKc, want_ids.data(), ids.data(), D0, D1, C);
  DeviceBuffer<int32_t> dids(ids);
  auto out_ids = poisoned<int32_t>(ids.size());
  k().transpose_01_i32(kc(), out_ids, dids, D0, D1, C);
  EXPECT_EQ(out_ids.download(), want_ids);
  const int64_t R = 45, h = 129;
  const auto rows = random_vector(R * h, 6), s = random_vector(R, 7);
  std::vector<float> scaled(R * h);
  ref::scale_rows(kRefKc, scaled.data(), rows.data(), s.data(), R, h);
  DeviceBuffer<float> drows(rows), ds(s);
  auto dout = poisoned<float>(R * h);
  k().scale_rows(kc(), dout, drows, ds, R, h);
  EXPECT_EQ(dout.download(), scaled);
}

TEST_F(CudaKernelTest, ChecksReturnTheReferenceCounts) {
  for (const int64_t n : kSizes) {
    SCOPED_TRACE(n);
    auto x = random_vector(n, 8);
    const auto mask = random_vector(n, 9, 0.5f, 0.5f);
    for (int64_t i = 0; i < n; i += 97)
      x[i] = (i / 97) % 3 == 0 ? NAN : (i / 97) % 3 == 1 ? INFINITY : -INFINITY;
    DeviceBuffer<float> dx(x), dmask(mask);
    EXPECT_EQ(k().count_nonfinite(kc(), dx, n), ref::count_nonfinite(kRefKc, x.data(), n));
    auto sparse = random_vector(n, 11);
    for (int64_t i = 0; i < n; i += 5) sparse[i] = (i / 5) % 2 == 0 ? 0.0f : -0.0f;
    DeviceBuffer<float> dsparse(sparse);
    EXPECT_EQ(k().count_zeros(kc(), dsparse, n), ref::count_zeros(kRefKc, sparse.data(), n));
    const auto finite = random_vector(n, 10);
    DeviceBuffer<float> dfinite(finite);
    double want[2], got[2];
    ref::masked_sums(kRefKc, want, finite.data(), mask.data(), n);
    k().masked_sums(kc(), got, dfinite, dmask, n);
    EXPECT_NEAR(got[0], want[0],
                1e-12 * (1.0 + std::fabs(want[0])) * std::sqrt(static_cast<double>(n)));
    EXPECT_NEAR(got[1], want[1],
                1e-12 * (1.0 + std::fabs(want[1])) * std::sqrt(static_cast<double>(n)));
  }
}

}  // namespace
}  // namespace mindspeed
