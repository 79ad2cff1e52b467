// The synthetic malaria-scale problem shared by the benchmarks: 1,044,683 pixels in 957 units
// whose sizes run from 13 to 6,667 pixels (the paper's data), 18 covariates and 2 coordinates (km),
// and unit counts drawn from a known log-linear intensity with a smooth spatial term.
#pragma once

#include <string>

#include "core/dataset.hpp"
#include "core/model.hpp"

namespace vbagg::bench {

struct ProblemOptions {
  Index pixels = 1044683;
  Index bags = 957;
  Index min_bag = 13, max_bag = 6667;
  Index covariates = 18;
  Index inducing = 576;  // M of the benchmark model
  unsigned long long seed = 1;
};

// Reads the flags every benchmark program shares (--pixels, --bags, --inducing) into o; false for
// any other key.
bool read_problem_flag(const std::string& key, const std::string& value, ProblemOptions& o);

// Rows 0..covariates-1 of the inputs are covariates (about unit variance), the last two rows
// are coordinates in km. Units are compact square blocks of 1 km pixels on a 60 km lattice.
Dataset make_problem(const ProblemOptions& options);

// The benchmark model: `covariate_kernel` (make_kernel's: ard, ard+additive, ...) on the covariates
// + matern32 on the coordinates, M inducing points by k-means++, q equal to the prior except for a
// small seeded perturbation so that every gradient term is exercised.
Model make_problem_model(const Dataset& data, Index covariates, Index inducing, const std::string& link,
                         const std::string& covariance, unsigned long long seed = 1,
                         const std::string& covariate_kernel = "ard");

}  // namespace vbagg::bench
