#include "link.hpp"

#include <cmath>
#include <stdexcept>

#include "gauss_hermite.hpp"

namespace vbagg {

// Declared here, defined in links/*.cpp.
const LinkFunction& exp_link();
const LinkFunction& square_link();
const LinkFunction& identity_link();
const LinkFunction& logit_link();

const std::vector<const LinkFunction*>& link_registry() {
  static const std::vector<const LinkFunction*> links = [] {
    std::vector<const LinkFunction*> l{&exp_link(), &square_link(), &identity_link(), &logit_link()};
    for (size_t i = 0; i < l.size(); ++i)
      if (static_cast<size_t>(l[i]->id()) != i) throw std::logic_error("link registry out of enum order");
    return l;
  }();
  return links;
}

const LinkFunction& link_of(Link link) { return *link_registry().at(static_cast<size_t>(link)); }

double LinkFunction::expected_total(const Eigen::Ref<const Vector>& w, const Eigen::Ref<const Vector>& m,
                                    const Eigen::Ref<const Vector>& s2) const {
  double total = 0;
  for (Index i = 0; i < w.size(); ++i) total += w[i] * mean(m[i], s2[i]);
  return total;
}

double LinkFunction::mean_slope(double m, double s2) const {
  const NormalQuadrature& q = normal_quadrature(32);
  const double s = std::sqrt(s2);
  double e = 0;
  for (Index j = 0; j < q.nodes.size(); ++j) e += q.weights[j] * psi_derivative(m + s * q.nodes[j]);
  return e;
}

namespace {
[[noreturn]] void no_counts(const LinkFunction& l) {
  throw ConfigError(std::string("the ") + l.name() + " link does not define a count bag's mean");
}
}  // namespace

BagNeeds LinkFunction::count_needs(const ModelSpec&) const { no_counts(*this); }
void LinkFunction::count_moments(const ModelSpec&, const BagPosterior&, CountMoments&) const { no_counts(*this); }
void LinkFunction::count_moments_backward(const ModelSpec&, const BagPosterior&, const CountMoments&,
                                          const CountMomentsGradient&, BagGradient&) const {
  no_counts(*this);
}

}  // namespace vbagg
