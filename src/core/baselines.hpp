// Baselines of MODEL.md section 9 that need no fitting.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "dataset.hpp"

namespace vbagg {

// The constant model (model.kind constant, and every evaluation's baseline): a training unit's
// rate is its own y_a / P_a; any other unit gets the training units' sum y / sum P. For binomial
// data the exposure is the number tested n_a rather than P_a (the rate is a prevalence).
struct ConstantRates {
  std::map<std::string, double> unit;  // by unit id
  double overall = 0;
  double of(const std::string& unit_id) const;
};
ConstantRates fit_constant_rates(const Dataset& data, const std::vector<Index>& train_bags);

// The constant within-bag rate of every pixel, lambda_i = y_a / P_a (dataset order), and sum y /
// sum P: the constant model fitted to every bag, for tests and experiments on synthetic data.
Vector constant_rate(const Dataset& data);
double overall_rate(const Dataset& data);

// bag-pixel baseline: each bag collapsed to one pseudo-pixel with the weight-averaged inputs
// x_a = sum_i c_i p_i x_i / P_a and weight P_a, so the same model can be fitted with bags of one.
Dataset collapse_bags(const Dataset& data);

}  // namespace vbagg
