// The CPU backend's elementwise loops and sums (ops/cpu/cpu_backend.cpp) against the shared functors
// and a float64 sum: every unary and binary op, each compiled as its own loop, over a flat pass and
// every broadcast row kind (steps 1 and 1, 1 and 0, 0 and 1, 0 and 0, a 3-D broadcast), and sums of
// contiguous rows of lengths around the eight lanes, which must also repeat bit for bit.
#include "test_util.h"

#include <random>

#include "ops/backend.h"
#include "ops/functors.h"
#include "ops/op_util.h"

namespace {

using sg::detail::BinaryOp;
using sg::detail::UnaryOp;

/// Equal, or both NaN, or within a few ulps of the operands' and the results' size (a loop may
/// contract a + alpha·b into one rounding where the scalar call rounds twice).
template <typename T>
bool same_value(T x, T y, T scale) {
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  if (x == y) return true;
  return std::abs(x - y) <= 8 * std::numeric_limits<T>::epsilon() * (scale + std::max(std::abs(x), std::abs(y)));
}

template <typename T>
sg::Tensor random_tensor(const sg::Shape& shape, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, 1.5);
  std::vector<double> values(static_cast<size_t>(sg::shape_numel(shape)));
  for (double& v : values) v = normal(rng);
  values[0] = 0.0;  // the ops' branches at zero
  return sg::from_vector(values, shape, std::is_same_v<T, float> ? sg::kFloat32 : sg::kFloat64);
}

/// Element i of x broadcast to `out_shape` (x's shape aligned on the last dimension).
template <typename T>
T broadcast_element(const sg::Tensor& x, const sg::Shape& out_shape, int64_t i) {
  const size_t rank = out_shape.size(), x_rank = x.shape().size();
  int64_t offset = 0, stride = 1;
  for (size_t d = rank; d-- > 0;) {
    const int64_t index = i % out_shape[d];
    i /= out_shape[d];
    if (d + x_rank < rank) continue;
    const int64_t size = x.shape()[d + x_rank - rank];
    if (size != 1) offset += index * stride;
    stride *= size;
  }
  return static_cast<const T*>(x.data_ptr())[offset];
}

template <typename T>
void check_every_binary_op() {
  std::mt19937_64 rng(31);
  const std::vector<std::pair<sg::Shape, sg::Shape>> shapes = {
      {{5, 33}, {5, 33}}, {{5, 33}, {33}}, {{5, 33}, {5, 1}}, {{5, 1}, {5, 33}}, {{5, 1}, {1, 1}}, {{2, 3, 33}, {3, 1}}};
  const double alpha = 0.75;
  for (int op_index = 0; op_index <= static_cast<int>(BinaryOp::ClampMaxGrad); ++op_index) {
    const auto op = static_cast<BinaryOp>(op_index);
    for (const auto& [a_shape, b_shape] : shapes) {
      const sg::Tensor a = random_tensor<T>(a_shape, rng), b = random_tensor<T>(b_shape, rng);
      sg::Shape out_shape;
      const sg::detail::Broadcast bc = sg::detail::make_broadcast("test", a_shape, b_shape, out_shape);
      sg::Tensor out = sg::Tensor::empty(out_shape, a.dtype());
      sg::detail::backend_for(sg::kCPU).binary(op, a, b, out, bc, alpha);
      const T* o = static_cast<const T*>(out.data_ptr());
      for (int64_t i = 0; i < out.numel(); ++i) {
        const T av = broadcast_element<T>(a, out_shape, i), bv = broadcast_element<T>(b, out_shape, i);
        const T expected = sg::detail::apply_binary<T>(op, av, bv, T(alpha));
        ASSERT_TRUE(same_value(o[i], expected, std::abs(av) + std::abs(bv))) << "binary op " << op_index << ", shapes " << testing::PrintToString(a_shape)
                                                << " and " << testing::PrintToString(b_shape) << ", element " << i << ": " << o[i] << " vs " << expected;
      }
    }
  }
}

template <typename T>
void check_every_unary_op() {
  std::mt19937_64 rng(32);
  const sg::Tensor x = random_tensor<T>({7, 19}, rng);
  for (int op_index = 0; op_index <= static_cast<int>(UnaryOp::FiniteOrZero); ++op_index) {
    const auto op = static_cast<UnaryOp>(op_index);
    for (double alpha : {0.5, 3.0}) {
      sg::Tensor out = sg::Tensor::empty(x.shape(), x.dtype());
      sg::detail::backend_for(sg::kCPU).unary(op, x, out, alpha);
      const T* in = static_cast<const T*>(x.data_ptr());
      const T* o = static_cast<const T*>(out.data_ptr());
      for (int64_t i = 0; i < x.numel(); ++i) {
        const T expected = sg::detail::apply_unary<T>(op, in[i], T(alpha));
        ASSERT_TRUE(same_value(o[i], expected, std::abs(in[i])))
            << "unary op " << op_index << ", alpha " << alpha << ", element " << i << ": " << o[i] << " vs " << expected;
      }
    }
  }
}

TEST(CpuElementwise, EveryBinaryOpOverEveryBroadcastRowKindMatchesTheFunctor) {
  check_every_binary_op<float>();
  check_every_binary_op<double>();
}

TEST(CpuElementwise, EveryUnaryOpMatchesTheFunctor) {
  check_every_unary_op<float>();
  check_every_unary_op<double>();
}

TEST(CpuElementwise, SquareBackwardIsTwiceXTimesTheGradient) {
  const sg::Tensor x = sg::from_vector(std::vector<double>{-2.0, 0.0, 1.5, 3.0}, {4}).requires_grad_();
  sg::sum(sg::square(x)).backward();
  EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{-4.0, 0.0, 3.0, 6.0}));
}

TEST(CpuSum, ContiguousRowsMatchAFloat64SumAndRepeat) {
  std::mt19937_64 rng(33);
  for (int64_t length : {1, 2, 7, 8, 9, 16, 17, 1000, 4097}) {
    const int64_t rows = 3;
    const sg::Tensor x = random_tensor<float>({rows, length}, rng);
    const sg::Tensor s = sg::sum(x, 1), again = sg::sum(x, 1);
    EXPECT_EQ(s.to_vector(), again.to_vector()) << "length " << length;
    const std::vector<double> values = x.to_vector();
    for (int64_t r = 0; r < rows; ++r) {
      double exact = 0;
      for (int64_t c = 0; c < length; ++c) exact += values[static_cast<size_t>(r * length + c)];
      EXPECT_NEAR(s.to_vector()[static_cast<size_t>(r)], exact, 1e-6 * (1 + std::abs(exact))) << "length " << length;
    }
  }
}

}  // namespace
