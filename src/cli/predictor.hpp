// A fitted model as predict and eval use it, whatever its kind: the GP kinds (vbagg, bag_pixel,
// nystrom) through core/predict, the constant model through its rate per unit. The apps ask it
// what it can give (a posterior, a latent field) rather than comparing kinds.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/predict.hpp"
#include "io/model_file.hpp"

namespace vbagg::cli {

class Predictor {
 public:
  virtual ~Predictor() = default;

  // A posterior: sd, quantile, exceedance and latent-sd maps, and calibration. Point estimates
  // (nystrom, constant) have none.
  virtual bool has_posterior() const = 0;
  // A latent GP f: the latent_mean map and the maps' account of what they include.
  virtual bool has_latent() const = 0;
  // predict_pixels reads the unit holding each pixel (and no inputs).
  virtual bool needs_pixel_units() const = 0;
  // The bag observations of source `source` (0: the first or only) are counts, so the Poisson
  // constant baseline is comparable.
  virtual bool counts(int source = 0) const = 0;

  // Predicted totals of the listed bags of d (inputs in the model's order, standardised).
  virtual Vector unit_totals(const Dataset& d, const std::vector<Index>& bags, int threads) const = 0;
  // Sorted predictive draws of each listed bag's observation (the joint latent draws and the
  // observation noise; point estimates: the noise only), handed to `use` with the bag's place in
  // the list, one bag at a time. What the bags share (their unit effects) is worked out once for
  // the list. Seeded by the bag, so predict and eval agree, and the same for any number of threads.
  using DrawsOf = std::function<void(size_t place, const Vector& draws)>;
  virtual void unit_draws(const Dataset& d, const std::vector<Index>& bags, int samples, int threads,
                          const DrawsOf& use) const = 0;
  // Mean predictive NLL of the bags' observations; `totals` are their unit_totals.
  virtual double bag_nll_mean(const Dataset& d, const std::vector<Index>& bags, const Vector& totals,
                              int threads) const = 0;
  // Mean NLL of the bags' observations under their predictive distributions, the field's
  // uncertainty integrated for counts and surveys (bag_predictive_nll's `integrated`); bag_nll_mean
  // without a posterior.
  virtual double predictive_nll_mean(const Dataset& d, const std::vector<Index>& bags, const Vector& totals,
                                     int threads) const {
    return bag_nll_mean(d, bags, totals, threads);
  }
  // Predictions of task `task` (0: the first or only) at the pixels whose inputs are the columns of X
  // (model order, standardised); units[j] names the unit holding pixel j (nullptr: none) when
  // needs_pixel_units(), else is empty.
  virtual Prediction predict_pixels(const Matrix& X, const std::vector<const std::string*>& units,
                                    const PredictOptions& options, int task = 0) const = 0;
  // With a posterior: joint_bag_draws (core/predict.hpp) of the listed bags of d, all of one
  // source, `samples` per bag (a column per bag), a unit's periods sharing one draw of its effect
  // where they share the effect. Empty without a posterior.
  virtual Matrix joint_unit_draws(const Dataset& d, const std::vector<Index>& bags, int samples, int threads) const = 0;
  // With a posterior: draw_coverage (core/predict.hpp) of task `task`'s intensity at the pixels X
  // by the intervals lo/hi (a row per pixel, a column per level), `samples` joint draws.
  virtual Matrix draw_coverage(const Matrix& X, const Matrix& lo, const Matrix& hi, int samples, int threads,
                               int task = 0) const = 0;
};

// `same_units`: the data's units are those the model was trained on, so a unit's own fitted
// effect or rate applies; otherwise every unit is new.
std::unique_ptr<const Predictor> make_predictor(const io::ModelFile& file, bool same_units);

}  // namespace vbagg::cli
