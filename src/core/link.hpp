// A link Psi from the latent f to the intensity lambda = Psi(f): the distribution of lambda when
// f ~ N(m, s^2) (MODEL.md section 7), and the summary of a count bag's mean
// mu_a = sum_i w_i Psi(f_i) under q that the count likelihoods read (sections 4a, 4b, 4e).
// A new link is one file in links/ plus one line in link_registry().
#pragma once

#include <vector>

#include "bag.hpp"
#include "model.hpp"

namespace vbagg {

// The count-bag summary: every count likelihood is written in these three numbers.
struct CountMoments {
  double mean = 0;  // E[mu_a], exact
  double elog = 0;  // E[log mu_a]: the Jensen lower bound, or the second-order delta method
  double rho = 0;   // Var[mu_a] / E[mu_a]^2 by the delta method; 0 with the bound
  // Intermediate values of the forward pass, kept for the backward pass.
  Vector r, soft, h, u, n, Cu;  // h = T r (exp link, delta method, nystrom form): rho = sum_i d_i r_i^2 + |h|^2
  Matrix G;
  double half_var = 0;
};

// d l_a / d(mean, elog, rho), and d l_a / d h when a term couples the bag with others through h
// (a unit effect shared by a unit's periods; the exp link's delta method in nystrom form; empty:
// none).
struct CountMomentsGradient {
  double mean = 0, elog = 0, rho = 0;
  Vector h;
};

class LinkFunction {
 public:
  virtual ~LinkFunction() = default;
  virtual Link id() const = 0;
  virtual const char* name() const = 0;
  // Units of the latent map, for band descriptions ("log intensity").
  virtual const char* latent_meaning() const = 0;

  virtual double psi(double f) const = 0;
  virtual double psi_derivative(double f) const = 0;
  virtual double mean(double m, double s2) const = 0;
  virtual double variance(double m, double s2) const = 0;
  virtual double quantile(double m, double s2, double q) const = 0;    // q in (0, 1)
  virtual double exceedance(double m, double s2, double t) const = 0;  // P(lambda > t)
  // E[Psi'(f)] = d E[lambda] / d m (Stein's lemma): how strongly a pixel's intensity moves with its
  // latent value, which weighs its covariances in a bag's variance. By Gauss-Hermite quadrature
  // unless a link has the closed form.
  virtual double mean_slope(double m, double s2) const;
  // sum_i w_i E[lambda_i] over pixels with latent marginals m, s2: a bag's expected total.
  double expected_total(const Eigen::Ref<const Vector>& w, const Eigen::Ref<const Vector>& m,
                        const Eigen::Ref<const Vector>& s2) const;

  // The count-bag summary (only links whose intensity is positive define it).
  virtual BagNeeds count_needs(const ModelSpec& spec) const;
  virtual void count_moments(const ModelSpec& spec, const BagPosterior& bag, CountMoments& out) const;
  virtual void count_moments_backward(const ModelSpec& spec, const BagPosterior& bag, const CountMoments& fwd,
                                      const CountMomentsGradient& d, BagGradient& g) const;
};

// Every link, in the order of the Link enum.
const std::vector<const LinkFunction*>& link_registry();
const LinkFunction& link_of(Link link);

}  // namespace vbagg
