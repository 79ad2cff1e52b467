// Random Fourier features of a stationary kernel on the pixel grid: frequencies drawn from the
// kernel's spectrum and uniform phases, so that sum_r cos(w_r . s + phase_r), scaled, tends to a
// draw of the kernel's Gaussian process as the number of features grows (Rahimi and Recht). The
// synthetic countries draw their smooth fields from them.
#pragma once

#include <random>
#include <vector>

#include "types.hpp"

namespace vbagg {

struct FourierFrequencies {
  std::vector<double> ox, oy, phase;  // per feature: frequency (radians per pixel) in x and y, phase
};

// Appends `count` features of an rbf kernel with lengthscale `ls` pixels: w ~ N(0, I / ls^2).
void draw_rbf_frequencies(int count, double ls, std::mt19937_64& rng, FourierFrequencies& f);

// Makes rbf features those of a Matérn 5/2 kernel of the same lengthscale. That kernel's spectrum
// in 2-D is a Student t with 5 degrees of freedom, which is an rbf frequency scaled by sqrt(5 / g),
// g ~ chi^2(5), one g per feature. The scales come from `rng`, so the features keep their
// directions and phases, and the streams that drew them are not advanced.
void make_matern52(FourierFrequencies& f, std::mt19937_64& rng);

// The sum of the features at each pixel of a w x h grid (row-major), standardised to mean 0 and
// sd 1 over the grid.
Vector standardised_field(int w, int h, const FourierFrequencies& f);

}  // namespace vbagg
