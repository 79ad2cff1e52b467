// The pass's dense products (core/products.hpp) against plain loops, through each backend this
// machine has, and the two backends against each other.
#include "core/products.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace vbagg {
namespace {

std::vector<ProductsBackend> backends() {
  std::vector<ProductsBackend> b{ProductsBackend::eigen};
  if (openblas_available()) b.push_back(ProductsBackend::openblas);
  return b;
}

// C = alpha op(A) op(B) + beta C by three loops.
Matrix loops(double alpha, const Matrix& A, bool ta, const Matrix& B, bool tb, double beta, const Matrix& C) {
  const Matrix a = ta ? Matrix(A.transpose()) : A, b = tb ? Matrix(B.transpose()) : B;
  Matrix out = beta * C;
  for (Index i = 0; i < out.rows(); ++i)
    for (Index j = 0; j < out.cols(); ++j)
      for (Index k = 0; k < a.cols(); ++k) out(i, j) += alpha * a(i, k) * b(k, j);
  return out;
}

TEST(Products, GemmIsThePlainProductForEveryTransposeAndScale) {
  std::srand(3);
  const Index m = 37, n = 53, k = 29;
  for (ProductsBackend backend : backends())
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (auto [alpha, beta] : {std::pair{1.0, 0.0}, {1.0, 1.0}, {-2.5, 0.5}, {0.75, 1.0}}) {
          const Matrix A = ta ? Matrix::Random(k, m) : Matrix::Random(m, k);
          const Matrix B = tb ? Matrix::Random(n, k) : Matrix::Random(k, n);
          const Matrix C0 = Matrix::Random(m, n);
          // beta = 0 must not read C: NaN there would show.
          Matrix C = beta == 0 ? Matrix::Constant(m, n, std::nan("")) : C0;
          gemm_with(backend, alpha, A, ta, B, tb, beta, C);
          const Matrix want = loops(alpha, A, ta, B, tb, beta, beta == 0 ? Matrix::Zero(m, n) : C0);
          EXPECT_LT((C - want).cwiseAbs().maxCoeff(), 1e-13 * k)
              << "backend " << static_cast<int>(backend) << " ta " << ta << " tb " << tb << " alpha " << alpha;
        }
}

TEST(Products, GemmReadsAndWritesBlocksWithTheirStrides) {
  std::srand(5);
  const Matrix big_a = Matrix::Random(40, 30), big_b = Matrix::Random(30, 50);
  for (ProductsBackend backend : backends()) {
    Matrix big_c = Matrix::Random(45, 60);
    const Matrix before = big_c;
    // A 20 x 12 block of A times a 12 x 25 block of B, into a 20 x 25 block of C.
    gemm_with(backend, 1.0, big_a.block(3, 5, 20, 12), false, big_b.block(7, 2, 12, 25), false, 1.0,
              big_c.block(10, 20, 20, 25));
    const Matrix want = before.block(10, 20, 20, 25) + big_a.block(3, 5, 20, 12) * big_b.block(7, 2, 12, 25);
    EXPECT_LT((big_c.block(10, 20, 20, 25) - want).cwiseAbs().maxCoeff(), 1e-13);
    Matrix outside = big_c;
    outside.block(10, 20, 20, 25) = before.block(10, 20, 20, 25);
    EXPECT_EQ(outside, before) << "only the block is written";
  }
}

TEST(Products, RankUpdateWritesTheLowerTriangleOnly) {
  std::srand(7);
  const Index m = 41, n = 67;
  for (ProductsBackend backend : backends())
    for (double alpha : {1.0, -1.0, 0.3}) {
      const Matrix A = Matrix::Random(m, n), C0 = Matrix::Random(m, m);
      Matrix C = C0;
      rank_update_lower_with(backend, alpha, A, C);
      const Matrix full = C0 + alpha * A * A.transpose();
      for (Index j = 0; j < m; ++j)
        for (Index i = 0; i < m; ++i) {
          if (i >= j)
            EXPECT_NEAR(C(i, j), full(i, j), 1e-12) << i << "," << j;
          else
            EXPECT_EQ(C(i, j), C0(i, j)) << "upper " << i << "," << j;
        }
    }
}

// On the shapes of a pass (M = 576, a block of pixels), the two backends agree to rounding.
TEST(Products, OpenBlasAgreesWithEigenOnAPassShape) {
  if (!openblas_available()) GTEST_SKIP() << "OpenBLAS is not on this machine";
  std::srand(11);
  const Index M = 576, len = 700;
  Matrix L = Matrix::Random(M, M);
  const Matrix Q = L * L.transpose() / static_cast<double>(M), K = Matrix::Random(M, len);
  Matrix R1(M, len), R2(M, len);
  gemm_with(ProductsBackend::eigen, 1.0, Q, false, K, false, 0.0, R1);
  gemm_with(ProductsBackend::openblas, 1.0, Q, false, K, false, 0.0, R2);
  EXPECT_LT((R1 - R2).cwiseAbs().maxCoeff(), 1e-12 * R1.cwiseAbs().maxCoeff());
  Matrix G1 = Matrix::Zero(M, M), G2 = G1;
  rank_update_lower_with(ProductsBackend::eigen, -1.0, K, G1);
  rank_update_lower_with(ProductsBackend::openblas, -1.0, K, G2);
  const Matrix D = (G1 - G2).triangularView<Eigen::Lower>();
  EXPECT_LT(D.cwiseAbs().maxCoeff(), 1e-12 * G1.cwiseAbs().maxCoeff());
}

// The passes call the products from several threads at once: each call's result is its own.
TEST(Products, ThreadsCallingAtOnceGetTheirOwnResults) {
  std::srand(13);
  const Index M = 200, len = 300, calls = 8;
  const Matrix Q = Matrix::Random(M, M);
  std::vector<Matrix> K(calls), alone(calls), together(calls);
  for (Index c = 0; c < calls; ++c) {
    K[static_cast<size_t>(c)] = Matrix::Random(M, len);
    alone[static_cast<size_t>(c)].resize(M, len);
    gemm(1.0, Q, false, K[static_cast<size_t>(c)], false, 0.0, alone[static_cast<size_t>(c)]);
  }
#pragma omp parallel for num_threads(4) schedule(static, 1)
  for (Index c = 0; c < calls; ++c) {
    together[static_cast<size_t>(c)].resize(M, len);
    for (int r = 0; r < 5; ++r)
      gemm(1.0, Q, false, K[static_cast<size_t>(c)], false, 0.0, together[static_cast<size_t>(c)]);
  }
  for (Index c = 0; c < calls; ++c) EXPECT_EQ(together[static_cast<size_t>(c)], alone[static_cast<size_t>(c)]);
}

TEST(Products, NamesItsBackend) {
  const std::string d = products_backend_description();
  if (products_backend() == ProductsBackend::openblas)
    EXPECT_NE(d.find("OpenBLAS"), std::string::npos) << d;
  else
    EXPECT_EQ(d, "Eigen");
}

}  // namespace
}  // namespace vbagg
