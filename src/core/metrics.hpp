// Evaluation metrics of MODEL.md section 8.
#pragma once

#include <cmath>
#include <vector>

#include "types.hpp"

namespace vbagg {

struct BagNll {
  double sum = 0, mean = 0;
};

// Poisson NLL of observed bag counts y given predicted totals yhat (constants included).
BagNll bag_poisson_nll(const Vector& y, const Vector& yhat);
// Binomial NLL of observed positives y of n tested given prevalences p (constants included).
BagNll bag_binomial_nll(const Vector& y, const Vector& n, const Vector& p);
// Mean of (log y - log yhat)^2 over bags with y > 0 and yhat > 0.
double bag_log_mse(const Vector& y, const Vector& yhat);
double mean_squared_error(const Vector& a, const Vector& b);
double correlation(const Vector& a, const Vector& b);
// Mean Poisson NLL of individual counts under predicted rates.
double pixel_poisson_nll(const Vector& counts, const Vector& rate);

// Fraction of truths inside [lower_k, upper_k] for each level k (columns of lower/upper).
Vector interval_coverage(const Vector& truth, const Matrix& lower, const Matrix& upper);

// Quantile p of a sample given sorted ascending: the smallest value whose empirical CDF is >= p
// (the inverse of the empirical CDF).
double empirical_quantile(const Vector& sorted, double p);

// Randomised probability integral transform of an observation y under the predictive
// distribution given by sorted draws: F(y-) + v (F(y) - F(y-)), v ~ U(0, 1). For counts F(y-) is
// F(y - 1); uniform on (0, 1) when the predictive distribution is calibrated.
double randomized_pit(const Vector& sorted, double y, double v);

// Fractions of the values in [0, 1] falling in each of `bins` equal bins.
std::vector<double> unit_histogram(const std::vector<double>& values, int bins);

// What a calibrated model's coverage of one map would be, from draw_coverage's fractions (a row
// per joint posterior draw, a column per level): per level the central 90 % of the draws'
// coverage (low, high), and the calibration error (mean over levels of |coverage - level|) of
// the draws, its mean and 90th percentile.
struct CoverageBand {
  std::vector<double> low, high;
  double error_mean = NAN, error_p90 = NAN;
};
CoverageBand coverage_band(const Matrix& draw_coverage, const std::vector<double>& levels);

// The levels of the calibration metric and the quantiles bounding their central intervals.
const std::vector<double>& calibration_levels();
std::vector<double> central_interval_quantiles(const std::vector<double>& levels);  // lo1, hi1, lo2, ...

}  // namespace vbagg
