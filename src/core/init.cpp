#include "init.hpp"

#include <cmath>
#include <string>
#include <utility>

#include "inducing.hpp"
#include "likelihood.hpp"
#include "linear_start.hpp"

namespace vbagg {

namespace {

// Inducing inputs by k-means on the initial lengthscales' scale, so covariates (standardised) and
// coordinates (km) weigh alike in their placement.
Matrix place_inducing(const PixelColumns& place, const Vector& scale, Index count, unsigned long long seed) {
  KMeansOptions km;
  km.seed = seed;
  const Matrix sample = place.gather(kmeans_sample(place.count(), km));
  return scale.asDiagonal() * kmeans_on_sample(scale.cwiseInverse().asDiagonal() * sample, count, km);
}

// Latents 1.. of a model with shared latent fields: latent 0's kernel with lengthscales doubled
// for each further latent (so the latents start on distinct spatial scales), and their own
// inducing inputs, placed like latent 0's with their own seed.
void init_latents(Model& m, const PixelColumns& place, const Vector& scale, const InitOptions& o) {
  std::vector<Matrix> inducing{m.inducing};
  m.inducing_sizes = {m.inducing.cols()};
  for (Index q = 1; q < m.spec.latents; ++q) {
    Kernel k = m.kernel;
    for (auto& p : k.parts()) p.log_lengthscale.array() += static_cast<double>(q) * std::log(2.0);
    m.more_kernels.push_back(std::move(k));
    inducing.push_back(place_inducing(place, scale, o.inducing, o.seed + static_cast<unsigned long long>(q)));
    m.inducing_sizes.push_back(inducing.back().cols());
  }
  Index M = 0;
  for (const Matrix& W : inducing) M += W.cols();
  const Index D = m.inducing.rows();
  m.inducing.resize(D, M);
  Index b = 0;
  for (const Matrix& W : inducing) {
    m.inducing.middleCols(b, W.cols()) = W;
    b += W.cols();
  }
}

}  // namespace

Model init_model(const ModelSpec& spec, const Kernel& kernel, const Dataset& train, const InitOptions& o) {
  spec.validate();
  // A process of a data-parallel run may hold no training bag; the summary has them all.
  const Dataset& meta = o.shard ? o.shard->summary : train;
  if (train.num_bags() > 0 || !o.shard) train.validate();
  meta.validate();
  if (o.inducing < 1) throw ConfigError("the number of inducing points must be at least 1");
  Model m;
  m.spec = spec;
  m.kernel = kernel;
  m.jitter = o.jitter;
  const PixelColumns train_pixels = o.shard ? PixelColumns(train, *o.shard) : PixelColumns(train.inputs);
  init_kernel_median_heuristic(m.kernel, train_pixels.gather(median_heuristic_sample(train_pixels.count(), o.seed)));
  Vector scale = Vector::Ones(train.num_inputs());
  for (const auto& p : m.kernel.parts()) scale.segment(p.begin, p.dim).setConstant(std::exp(p.log_lengthscale[0]));
  const PixelColumns& place = o.placement ? *o.placement : train_pixels;
  if (place.rows() != train.num_inputs())
    throw DataError("the inducing points' placement inputs have " + std::to_string(place.rows()) +
                    " rows but the data " + std::to_string(train.num_inputs()));
  m.inducing = place_inducing(place, scale, o.inducing, o.seed);
  if (spec.latents > 1) init_latents(m, place, scale, o);
  const Index M = m.num_q();
  m.q_mean = Vector::Zero(M);
  m.q_chol = spec.map_estimate ? Matrix(Matrix::Zero(M, M)) : Matrix(Matrix::Identity(M, M));
  if (spec.linear_inputs > train.num_inputs())
    throw ConfigError("the linear mean needs " + std::to_string(spec.linear_inputs) + " inputs; the data have " +
                      std::to_string(train.num_inputs()));
  m.linear_mean = Vector::Zero(spec.num_linear_coefficients());
  m.task_means = Vector::Zero(spec.num_tasks() - 1);
  if (spec.mixed()) {
    // Task d leans on latent d mod Q and a little on the others: distinct weights keep the latents
    // from moving in step.
    m.mixing.resize(spec.num_tasks(), spec.latents);
    for (Index d = 0; d < spec.num_tasks(); ++d)
      for (Index q = 0; q < spec.latents; ++q) m.mixing(d, q) = q == d % spec.latents ? 1.0 : 0.3;
  }
  // The first source sets the mean; every source its own parameters from its own bags.
  m.more_sources.resize(static_cast<size_t>(spec.num_sources() - 1));
  for (Index s = spec.num_sources() - 1; s >= 0; --s) {
    // Bag totals are all the likelihoods start from: the summary of a data-parallel run has them.
    const std::vector<Index> own = meta.bags_of_source(static_cast<int>(s));
    if (own.empty()) throw DataError("source '" + spec.source(s).name + "' has no training bags");
    Model view = m.for_source(s);
    likelihood_of(view.spec.likelihood).initialise(spec.num_sources() == 1 ? meta : subset_bags(meta, own), view);
    m.likelihood_params_of(s) = view.likelihood_params;
    m.mean_of(view.spec.task) = view.mean;  // sources run backwards: a task's first source sets its mean
  }
  start_linear_mean(m, train, o.shard ? o.shard->processes : nullptr);
  std::vector<Index> all(static_cast<size_t>(meta.num_bags()));
  for (Index a = 0; a < meta.num_bags(); ++a) all[static_cast<size_t>(a)] = a;
  attach_unit_effects(m, meta, all);
  return m;
}

void attach_unit_effects(Model& model, const Dataset& data, const std::vector<Index>& bags) {
  for (Index s = 0; s < model.spec.num_sources(); ++s) {
    if (!model.spec.source(s).unit_effect) continue;
    UnitEffect& u = model.unit_effect_of(s);
    u.units.clear();
    for (Index a : bags)
      if (data.source_of(a) == s) u.units.push_back(data.bag_id(a));
  }
}

}  // namespace vbagg
