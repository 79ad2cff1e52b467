#include "random_features.hpp"

#include <cmath>

namespace vbagg {

void draw_rbf_frequencies(int count, double ls, std::mt19937_64& rng, FourierFrequencies& f) {
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> phase(0, 2 * M_PI);
  for (int r = 0; r < count; ++r) {
    f.ox.push_back(normal(rng) / ls);
    f.oy.push_back(normal(rng) / ls);
    f.phase.push_back(phase(rng));
  }
}

void make_matern52(FourierFrequencies& f, std::mt19937_64& rng) {
  std::chi_squared_distribution<double> chi2(5.0);
  for (size_t r = 0; r < f.ox.size(); ++r) {
    const double scale = std::sqrt(5.0 / chi2(rng));
    f.ox[r] *= scale;
    f.oy[r] *= scale;
  }
}

Vector standardised_field(int w, int h, const FourierFrequencies& f) {
  const size_t R = f.ox.size();
  Vector out(static_cast<Index>(w) * h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      double s = 0;
      for (size_t r = 0; r < R; ++r) s += std::cos(f.ox[r] * x + f.oy[r] * y + f.phase[r]);
      out[static_cast<Index>(y) * w + x] = s;
    }
  out.array() -= out.mean();
  out /= std::sqrt(out.squaredNorm() / static_cast<double>(out.size()));
  return out;
}

}  // namespace vbagg
