#include "core/random_features.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace vbagg {
namespace {

// The features' kernel: E cos(w . h) over the spectrum is k(h) / k(0), so the mean over many drawn
// frequencies must match the closed form at every lag and in every direction (Monte Carlo error
// about 0.0016 with 200,000 features).
double mean_cosine(const FourierFrequencies& f, double hx, double hy) {
  double s = 0;
  for (size_t r = 0; r < f.ox.size(); ++r) s += std::cos(f.ox[r] * hx + f.oy[r] * hy);
  return s / static_cast<double>(f.ox.size());
}

TEST(RandomFeatures, SpectraMatchTheirKernels) {
  const double ls = 10;
  std::mt19937_64 rng(7), scales(8);
  FourierFrequencies rbf;
  draw_rbf_frequencies(200000, ls, rng, rbf);
  FourierFrequencies matern = rbf;
  make_matern52(matern, scales);
  EXPECT_EQ(matern.phase, rbf.phase);
  for (const double r : {2.0, 5.0, 10.0, 20.0, 30.0}) {
    const double k_rbf = std::exp(-r * r / (2 * ls * ls));
    const double a = std::sqrt(5.0) * r / ls, k_matern = (1 + a + a * a / 3) * std::exp(-a);
    for (const double angle : {0.0, 0.9, 2.0}) {
      const double hx = r * std::cos(angle), hy = r * std::sin(angle);
      EXPECT_NEAR(mean_cosine(rbf, hx, hy), k_rbf, 0.01) << "rbf, lag " << r;
      EXPECT_NEAR(mean_cosine(matern, hx, hy), k_matern, 0.01) << "Matérn 5/2, lag " << r;
    }
  }
}

// The field is the standardised sum of the features over the grid, row-major.
TEST(RandomFeatures, FieldIsTheStandardisedSum) {
  FourierFrequencies f{{0.3, 0.0}, {0.0, 0.2}, {0.0, 1.0}};
  const int w = 7, h = 5;
  const Vector field = standardised_field(w, h, f);
  Vector sum(w * h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) sum[y * w + x] = std::cos(0.3 * x) + std::cos(0.2 * y + 1.0);
  sum.array() -= sum.mean();
  sum /= std::sqrt(sum.squaredNorm() / (w * h));
  EXPECT_LT((field - sum).cwiseAbs().maxCoeff(), 1e-12);
}

}  // namespace
}  // namespace vbagg
