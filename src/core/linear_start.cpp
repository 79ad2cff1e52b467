#include "linear_start.hpp"

#include <Eigen/Cholesky>
#include <cmath>
#include <utility>

#include "likelihood.hpp"

namespace vbagg {

namespace {

// The listed bags' counts and people (sum of c_i p_i), summed over the processes.
std::pair<double, double> counts_and_people(const Dataset& data, const std::vector<Index>& bags,
                                            const Collective* processes) {
  Vector sums = Vector::Zero(2);
  for (Index a : bags) {
    const Index begin = data.bag_begin(a), n = data.bag_size(a);
    sums[0] += data.response[a];
    sums[1] += data.coverage.segment(begin, n).dot(data.population.segment(begin, n));
  }
  if (processes) processes->sum(sums);
  return {sums[0], sums[1]};
}

// The log likelihood of the counts under (c, beta), up to the counts' constants, with its
// gradient and Fisher information when asked; summed over the processes.
double regression_log_likelihood(const Dataset& data, const std::vector<Index>& bags, Index inputs, const Vector& theta,
                                 const Collective* processes, Vector* grad, Matrix* fisher) {
  const Index P = inputs + 1;
  Vector sums = Vector::Zero(1 + (grad ? P : 0) + (fisher ? P * P : 0));
  Vector g_a(P);
  for (Index a : bags) {
    const Index begin = data.bag_begin(a), n = data.bag_size(a);
    const auto X = data.inputs.middleCols(begin, n).topRows(inputs);
    const Vector rate = (data.coverage.segment(begin, n).cwiseProduct(data.population.segment(begin, n)).array() *
                         (theta[0] + (X.transpose() * theta.tail(inputs)).array()).exp())
                            .matrix();
    const double total = rate.sum(), y = data.response[a];
    if (!(total > 0)) continue;  // a bag without people says nothing about the rate
    sums[0] += y * std::log(total) - total;
    g_a[0] = total;
    g_a.tail(inputs).noalias() = X * rate;
    if (grad) sums.segment(1, P) += (y / total - 1) * g_a;
    // Expected information: Var(y_a) = Lambda_a, so E[-Hessian] = g_a g_a^T / Lambda_a.
    if (fisher) Eigen::Map<Matrix>(sums.data() + 1 + (grad ? P : 0), P, P).noalias() += g_a * g_a.transpose() / total;
  }
  if (processes) processes->sum(sums);
  if (grad) *grad = sums.segment(1, P);
  if (fisher) *fisher = Eigen::Map<const Matrix>(sums.data() + 1 + (grad ? P : 0), P, P);
  return sums[0];
}

}  // namespace

bool poisson_regression(const Dataset& data, const std::vector<Index>& bags, Index inputs, double prior_sd,
                        const Collective* processes, double& c, Vector& beta) {
  const auto [y, people] = counts_and_people(data, bags, processes);
  if (!(y > 0 && people > 0)) return false;
  const double precision = prior_sd > 0 ? 1.0 / (prior_sd * prior_sd) : 0.0;
  auto objective = [&](const Vector& t, Vector* g, Matrix* F) {
    double value = regression_log_likelihood(data, bags, inputs, t, processes, g, F) -
                   0.5 * precision * t.tail(inputs).squaredNorm();
    if (g) g->tail(inputs) -= precision * t.tail(inputs);
    if (F) F->diagonal().tail(inputs).array() += precision;
    return value;
  };
  Vector theta = Vector::Zero(inputs + 1), g;
  theta[0] = std::log(y / people);
  Matrix F;
  double value = objective(theta, &g, &F);
  constexpr int kIterations = 25;
  for (int it = 0; it < kIterations && std::isfinite(value); ++it) {
    const Eigen::LDLT<Matrix> ldlt(F);
    if (ldlt.info() != Eigen::Success) break;
    const Vector step = ldlt.solve(g);
    if (!step.allFinite()) break;
    double t = 1, trial = -INFINITY;
    for (; t > 1e-6; t *= 0.5) {
      trial = objective(theta + t * step, nullptr, nullptr);
      if (trial >= value) break;
    }
    if (!(t > 1e-6)) break;
    theta += t * step;
    const double gained = trial - value;
    value = objective(theta, &g, &F);
    if (gained <= 1e-10 * std::max(1.0, std::abs(value))) break;
  }
  if (!std::isfinite(value) || !theta.allFinite()) return false;
  c = theta[0];
  beta = theta.tail(inputs);
  return true;
}

void start_linear_mean(Model& model, const Dataset& data, const Collective* processes) {
  const ModelSpec& spec = model.spec;
  if (spec.num_linear_point() == 0) return;
  for (Index d = 0; d < spec.num_tasks(); ++d) {
    // The task's first source set its mean (init_model): only a count source with the exp link
    // shares the regression's scale.
    Index source = 0;
    while (source < spec.num_sources() && spec.source(source).task != d) ++source;
    if (source == spec.num_sources()) continue;
    const SourceSpec first = spec.source(source);
    if (!likelihood_of(first.likelihood).is_count() || first.link != Link::exp) continue;
    // Every process must take part, even one that holds none of the source's bags.
    const std::vector<Index> bags = data.bags_of_source(static_cast<int>(source));
    double c = 0;
    Vector beta;
    if (!poisson_regression(data, bags, spec.linear_inputs, spec.linear_prior_sd, processes, c, beta)) continue;
    // The likelihood's start keeps the mean that far from the log of the overall rate (the prior
    // variance's 1/2 under the exp link): the regression's intercept keeps the same distance.
    const auto [y, people] = counts_and_people(data, bags, processes);
    model.mean_of(d) += c - std::log(y / people);
    model.linear_mean.segment(d * spec.num_linear_point(), spec.num_linear_point()) = beta;
  }
}

}  // namespace vbagg
