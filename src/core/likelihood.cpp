#include "likelihood.hpp"

#include <stdexcept>
#include <string>

namespace vbagg {

// Declared here, defined in likelihoods/*.cpp.
const BagLikelihood& poisson_likelihood();
const BagLikelihood& negative_binomial_likelihood();
const BagLikelihood& normal_likelihood();
const BagLikelihood& exponential_likelihood();
const BagLikelihood& binomial_likelihood();

namespace {

[[noreturn]] void no_unit_effect(const BagLikelihood& lik) {
  throw std::logic_error(std::string("likelihood '") + lik.name() + "' has no unit effect");
}

}  // namespace

UnitEffectMoments BagLikelihood::unit_effect_prior(double) const { no_unit_effect(*this); }
UnitEffectMoments BagLikelihood::unit_effect_given(const Observation&, double, const Vector&, double) const {
  no_unit_effect(*this);
}
double BagLikelihood::expected_with_unit_effect(double, double, const UnitEffectMoments&) const {
  no_unit_effect(*this);
}
double BagLikelihood::aggregate_with_unit_effect(double, double) const { no_unit_effect(*this); }

const std::vector<const BagLikelihood*>& likelihood_registry() {
  static const std::vector<const BagLikelihood*> all = [] {
    std::vector<const BagLikelihood*> l{&poisson_likelihood(), &negative_binomial_likelihood(), &normal_likelihood(),
                                        &exponential_likelihood(), &binomial_likelihood()};
    for (size_t i = 0; i < l.size(); ++i)
      if (static_cast<size_t>(l[i]->id()) != i) throw std::logic_error("likelihood registry out of enum order");
    return l;
  }();
  return all;
}

const BagLikelihood& likelihood_of(LikelihoodKind kind) { return *likelihood_registry().at(static_cast<size_t>(kind)); }

// Sampling reads the nystrom form of q (MODEL.md 4e ii), whatever the likelihood: draws T^T eps and
// the residual sd.
BagNeeds bag_needs(const ModelSpec& spec) {
  return spec.expectation == Expectation::sample ? BagNeeds::residual : likelihood_of(spec.likelihood).needs(spec);
}

double bag_term(const ModelSpec& spec, const Vector& params, const BagPosterior& bag, BagGradient* grad) {
  const BagLikelihood& lik = likelihood_of(spec.likelihood);
  if (spec.expectation == Expectation::sample) return sampled_bag_term(spec, lik, params, bag, grad);
  return lik.term(spec, params, bag, grad);
}

}  // namespace vbagg
