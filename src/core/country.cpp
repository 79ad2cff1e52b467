#include "country.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "logistic.hpp"
#include "random_features.hpp"

namespace vbagg {

namespace {

// A smooth random field of lengthscale `ls` pixels: 40 random Fourier features.
constexpr int kFieldFrequencies = 40;
Vector smooth_field(int w, int h, double ls, std::mt19937_64& rng) {
  FourierFrequencies f;
  draw_rbf_frequencies(kFieldFrequencies, ls, rng, f);
  return standardised_field(w, h, f);
}

// The latent field g with `frequencies` features of `kernel`: the first of the 40 every country
// draws from `rng`, and any beyond them from a stream of their own, so the rest of the country is
// the same whatever their number and kernel.
Vector latent_field(int w, int h, double ls, int frequencies, CountryOptions::FieldKernel kernel,
                    unsigned long long seed, std::mt19937_64& rng) {
  FourierFrequencies f;
  draw_rbf_frequencies(kFieldFrequencies, ls, rng, f);
  for (auto* v : {&f.ox, &f.oy, &f.phase}) v->resize(std::min<size_t>(v->size(), static_cast<size_t>(frequencies)));
  if (frequencies > kFieldFrequencies) {
    std::mt19937_64 more(seed ^ 0x3c6ef372fe94f82bULL);
    draw_rbf_frequencies(frequencies - kFieldFrequencies, ls, more, f);
  }
  if (kernel == CountryOptions::FieldKernel::matern52) {
    std::mt19937_64 scales(seed ^ 0xa0761d6478bd642fULL);
    make_matern52(f, scales);
  }
  return standardised_field(w, h, f);
}

// Provinces group the units by the nearest province seed to each unit's seed; their counts come
// from a stream of their own, so the rest of the country is unchanged by them.
void add_provinces(Country& c, const CountryOptions& o, const std::vector<double>& sx, const std::vector<double>& sy,
                   const Vector& unit_rate) {
  std::mt19937_64 rng(o.seed ^ 0x2545f4914f6cdd1dULL);
  std::uniform_real_distribution<double> unif(0, 1);
  std::normal_distribution<double> normal;
  const int P = std::min(o.units, std::max(2, o.units / 6));
  std::vector<double> px(static_cast<size_t>(P)), py(static_cast<size_t>(P));
  // Province seeds at distinct unit seeds, so no province is empty.
  std::vector<int> pick(static_cast<size_t>(o.units));
  for (int u = 0; u < o.units; ++u) pick[static_cast<size_t>(u)] = u;
  for (int p = 0; p < P; ++p) {
    const int k = p + static_cast<int>(unif(rng) * (o.units - p));
    std::swap(pick[static_cast<size_t>(p)], pick[static_cast<size_t>(k)]);
    px[static_cast<size_t>(p)] = sx[static_cast<size_t>(pick[static_cast<size_t>(p)])];
    py[static_cast<size_t>(p)] = sy[static_cast<size_t>(pick[static_cast<size_t>(p)])];
  }
  c.province_of_unit.assign(static_cast<size_t>(o.units), 0);
  Vector rate = Vector::Zero(P);
  for (int u = 0; u < o.units; ++u) {
    double best = 1e300;
    for (int p = 0; p < P; ++p) {
      const double dx = sx[static_cast<size_t>(u)] - px[static_cast<size_t>(p)],
                   dy = sy[static_cast<size_t>(u)] - py[static_cast<size_t>(p)];
      if (dx * dx + dy * dy < best) {
        best = dx * dx + dy * dy;
        c.province_of_unit[static_cast<size_t>(u)] = p;
      }
    }
    rate[c.province_of_unit[static_cast<size_t>(u)]] += unit_rate[u];
  }
  c.province_counts.resize(P);
  for (int p = 0; p < P; ++p) {
    const double sd = o.unit_noise_sd, u = sd > 0 ? -0.5 * sd * sd + sd * normal(rng) : 0.0;
    c.province_counts[p] = static_cast<double>(std::poisson_distribution<long long>(rate[p] * std::exp(u))(rng));
  }
}

// sigma(logit p + e), e ~ N(0, sd^2) from `rng`; p itself when sd is 0 (and no draw is taken).
double with_survey_noise(double p, double sd, std::mt19937_64& rng) {
  if (!(sd > 0) || !(p > 0) || !(p < 1)) return p;
  return logistic(logit(p) + sd * std::normal_distribution<double>()(rng));
}

// Survey clusters at pixels drawn in proportion to population, from a stream of their own.
void add_clusters(Country& c, const CountryOptions& o) {
  std::mt19937_64 rng(o.seed ^ 0x7f4a7c159e3779b9ULL);
  std::mt19937_64 noise_rng(o.seed ^ 0x2545f4914f6cdd1dULL);  // none drawn at sd 0: the clusters as before
  std::uniform_real_distribution<double> unif(0, 1);
  const Index N = c.population.size();
  Vector cumulative(N);
  double total = 0;
  for (Index i = 0; i < N; ++i) cumulative[i] = total += c.population[i];
  const int clusters = 2 * o.units;
  c.cluster_pixel.resize(static_cast<size_t>(clusters));
  c.cluster_tested.resize(clusters);
  c.cluster_positives.resize(clusters);
  for (int k = 0; k < clusters; ++k) {
    const double r = unif(rng) * total;
    const Index i =
        std::min<Index>(N - 1, std::upper_bound(cumulative.data(), cumulative.data() + N, r) - cumulative.data());
    c.cluster_pixel[static_cast<size_t>(k)] = i;
    c.cluster_tested[k] = std::floor(20 + 21 * unif(rng));
    const double pi = with_survey_noise(c.prevalence[i], o.survey_noise_sd, noise_rng);
    c.cluster_positives[k] = static_cast<double>(
        std::binomial_distribution<long long>(static_cast<long long>(c.cluster_tested[k]), pi)(rng));
  }
}

// The months of a seasonal country, from a stream of their own (the rest is unchanged by them).
void add_months(Country& c, const CountryOptions& o) {
  std::mt19937_64 rng(o.seed ^ 0x94d049bb133111ebULL);
  const Index N = c.population.size();
  const double extent = std::max(o.width, o.height);
  const Vector amplitude = (0.7 + 0.3 * smooth_field(o.width, o.height, extent * 0.3, rng).array()).max(0.1).matrix();
  const Vector peak = (0.3 + 0.06 * smooth_field(o.width, o.height, extent * 0.3, rng).array()).matrix();
  const Vector wetness = smooth_field(o.width, o.height, extent * 0.2, rng);
  const double trend = 0.15, span = o.months / 12.0;
  const int units = static_cast<int>(c.counts.size());
  c.monthly_counts.resize(units, o.months);
  for (int m = 0; m < o.months; ++m) {
    const double t = (m + 0.5) / 12.0;
    Vector lam(N), rain(N);
    for (Index i = 0; i < N; ++i) {
      lam[i] = c.intensity[i] / 12.0 *
               std::exp(amplitude[i] * std::cos(2 * M_PI * (t - peak[i])) + trend * (t - 0.5 * span));
      rain[i] = c.population[i] > 0 || !std::isnan(c.covariates[0][i])
                    ? 100.0 * (1 + std::cos(2 * M_PI * (t - peak[i] + 1.0 / 12))) * std::exp(0.3 * wetness[i])
                    : NAN;
    }
    Vector rate = Vector::Zero(units);
    for (Index i = 0; i < N; ++i) rate[c.unit_of_pixel[static_cast<size_t>(i)]] += c.population[i] * lam[i];
    for (int u = 0; u < units; ++u)
      c.monthly_counts(u, m) =
          static_cast<double>(std::poisson_distribution<long long>(rate[u] * std::exp(c.unit_effect[u]))(rng));
    c.monthly_intensity.push_back(std::move(lam));
    c.monthly_rain.push_back(std::move(rain));
  }
}

// Adds h(x), the covariates' part of log lambda, from the standardised covariates z_k. Linear:
// beta' z, term by term in the order every country before the nonlinear option summed it, so
// linear countries are the same to the last bit. Nonlinear, as malaria's drivers act: a hump in
// the first (transmission peaks at a middle temperature), a threshold in the second (rain matters
// up to a point), the product of the third and fourth (an interaction), each term about as strong
// as the linear one it replaces; linear in any covariate they leave (the third of three, the fifth
// and later). Their mean over the grid is taken out, so the country's mean incidence stays near
// the linear one's.
void add_covariate_effect(Vector& loglam, const std::vector<Vector>& z, const std::vector<double>& beta,
                          CountryOptions::CovariateEffects effects) {
  const Index K = static_cast<Index>(z.size()), N = loglam.size();
  const bool nonlinear = effects == CountryOptions::CovariateEffects::nonlinear;
  // The covariates the nonlinear terms take: the first, the second, the third and fourth as a pair.
  const Index bent_covariates = !nonlinear ? 0 : K >= 4 ? 4 : std::min<Index>(K, 2);
  for (Index k = bent_covariates; k < K; ++k) loglam += beta[static_cast<size_t>(k)] * z[k];
  if (!nonlinear) return;
  Vector bent = 1.5 * (-z[0].array().square()).exp();
  if (K > 1) bent.array() += 0.5 * (2.0 * (z[1].array() - 0.3)).tanh();
  if (K > 3) bent.array() += 0.5 * z[2].array() * z[3].array();
  loglam += bent - Vector::Constant(N, bent.mean());
}

}  // namespace

Country make_country(const CountryOptions& o) {
  if (!(o.unit_noise_sd >= 0 && o.unit_noise_sd <= 3))
    throw ConfigError("synthetic country: the unit noise sd must be in [0, 3]");
  if (!(o.survey_noise_sd >= 0 && o.survey_noise_sd <= 3))
    throw ConfigError("synthetic country: the survey noise sd must be in [0, 3]");
  if (o.field_frequencies < 1 || o.field_frequencies > 100000)
    throw ConfigError("synthetic country: the field's frequencies must be in [1, 100000]");
  if (o.months < 0 || o.months > 600) throw ConfigError("synthetic country: the months must be in [0, 600]");
  if (o.width < 4 || o.height < 4 || o.units < 1 || o.covariates < 1 || o.units > o.width * o.height / 4)
    throw ConfigError(
        "synthetic country: need a grid of at least 4 x 4, at least one covariate, and 1 to (pixels / 4) units");
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> unif(0, 1);
  Country c;
  c.width = o.width;
  c.height = o.height;
  const Index N = static_cast<Index>(o.width) * o.height;
  const double extent = std::max(o.width, o.height);
  static const char* names[] = {"temperature", "rainfall", "night_lights", "travel_time"};
  static const double centre[] = {24.0, 900.0, 2.0, 120.0}, spread[] = {3.0, 250.0, 1.5, 60.0};
  std::vector<Vector> standard;
  for (int k = 0; k < o.covariates; ++k) {
    standard.push_back(smooth_field(o.width, o.height, extent * (0.08 + 0.04 * (k % 3)), rng));
    c.covariate_names.push_back(k < 4 ? names[k] : "covariate_" + std::to_string(k + 1));
    const double mu = k < 4 ? centre[k] : 0.0, sd = k < 4 ? spread[k] : 1.0;
    c.covariates.push_back(mu + sd * standard.back().array());
    c.beta.push_back(k == 0 ? 0.6 : k == 1 ? -0.4 : 0.5 * normal(rng));
  }
  // Population: a smooth log-density plus a few towns.
  Vector logpop = 5.0 + 0.8 * smooth_field(o.width, o.height, extent * 0.15, rng).array();
  for (int t = 0; t < 5; ++t) {
    const double tx = unif(rng) * o.width, ty = unif(rng) * o.height, r = extent * (0.02 + 0.03 * unif(rng));
    for (int y = 0; y < o.height; ++y)
      for (int x = 0; x < o.width; ++x)
        logpop[static_cast<Index>(y) * o.width + x] +=
            2.5 * std::exp(-((x - tx) * (x - tx) + (y - ty) * (y - ty)) / (2 * r * r));
  }
  c.population = logpop.array().exp();
  // log lambda = beta0 + h(x) + g(s): about 5 % incidence on average.
  c.field = 0.5 * latent_field(o.width, o.height, extent * 0.25, o.field_frequencies, o.field_kernel, o.seed, rng);
  const Vector base = Vector::Constant(N, std::log(0.05)) + c.field;
  Vector loglam = base;
  add_covariate_effect(loglam, standard, c.beta, o.covariate_effects);
  c.covariate_effect = loglam - base;
  c.intensity = loglam.array().exp();
  // A lake: covariates missing and nobody living there.
  const double lx = 0.3 * o.width, ly = 0.6 * o.height, lr = 0.06 * extent;
  for (int y = 0; y < o.height; ++y)
    for (int x = 0; x < o.width; ++x)
      if ((x - lx) * (x - lx) + (y - ly) * (y - ly) < lr * lr) {
        const Index i = static_cast<Index>(y) * o.width + x;
        for (auto& cov : c.covariates) cov[i] = NAN;
        c.population[i] = 0;
      }
  // Units: nearest of `units` random seeds (a discrete Voronoi partition). Seeds stay out of the
  // lake, so every unit holds its seed's pixel and people.
  std::vector<double> sx(static_cast<size_t>(o.units)), sy(static_cast<size_t>(o.units));
  for (int u = 0; u < o.units; ++u) {
    double x, y;
    do {
      x = unif(rng) * o.width;
      y = unif(rng) * o.height;
    } while ((x - lx) * (x - lx) + (y - ly) * (y - ly) < 2.25 * (lr + 1) * (lr + 1));
    sx[static_cast<size_t>(u)] = x;
    sy[static_cast<size_t>(u)] = y;
  }
  c.unit_of_pixel.resize(static_cast<size_t>(N));
  c.counts = Vector::Zero(o.units);
  Vector rate = Vector::Zero(o.units);
  for (int y = 0; y < o.height; ++y)
    for (int x = 0; x < o.width; ++x) {
      int best = 0;
      double bd = 1e300;
      for (int u = 0; u < o.units; ++u) {
        const double d = (x + 0.5 - sx[static_cast<size_t>(u)]) * (x + 0.5 - sx[static_cast<size_t>(u)]) +
                         (y + 0.5 - sy[static_cast<size_t>(u)]) * (y + 0.5 - sy[static_cast<size_t>(u)]);
        if (d < bd) {
          bd = d;
          best = u;
        }
      }
      const Index i = static_cast<Index>(y) * o.width + x;
      c.unit_of_pixel[static_cast<size_t>(i)] = best;
      rate[best] += c.population[i] * c.intensity[i];
    }
  // The unit effects have a stream of their own, so a country without them is unchanged.
  c.unit_effect = Vector::Zero(o.units);
  if (o.unit_noise_sd > 0) {
    std::mt19937_64 noise_rng(o.seed ^ 0x9e3779b97f4a7c15ULL);
    for (int u = 0; u < o.units; ++u)
      c.unit_effect[u] = -0.5 * o.unit_noise_sd * o.unit_noise_sd + o.unit_noise_sd * normal(noise_rng);
  }
  for (int u = 0; u < o.units; ++u)
    c.counts[u] = static_cast<double>(std::poisson_distribution<long long>(rate[u] * std::exp(c.unit_effect[u]))(rng));
  c.expected = rate;

  // The survey has streams of its own, so the counts above are unchanged by it.
  c.prevalence =
      (loglam.array() - std::log(0.05) + std::log(0.25)).unaryExpr([](double f) { return 1 / (1 + std::exp(-f)); });
  Vector infected = Vector::Zero(o.units), people = Vector::Zero(o.units);
  for (Index i = 0; i < N; ++i) {
    const int u = c.unit_of_pixel[static_cast<size_t>(i)];
    infected[u] += c.population[i] * c.prevalence[i];
    people[u] += c.population[i];
  }
  add_provinces(c, o, sx, sy, rate);
  add_clusters(c, o);
  std::mt19937_64 survey_rng(o.seed ^ 0x5bd1e9955bd1e995ULL);
  std::mt19937_64 survey_noise_rng(o.seed ^ 0x9fb21c651e98df25ULL);
  c.tested.resize(o.units);
  c.positives.resize(o.units);
  for (int u = 0; u < o.units; ++u) {
    c.tested[u] = std::floor(100 + 400 * std::uniform_real_distribution<double>(0, 1)(survey_rng));
    const double pi =
        with_survey_noise(people[u] > 0 ? infected[u] / people[u] : 0.0, o.survey_noise_sd, survey_noise_rng);
    c.positives[u] =
        static_cast<double>(std::binomial_distribution<long long>(static_cast<long long>(c.tested[u]), pi)(survey_rng));
  }
  if (o.months > 0) add_months(c, o);
  return c;
}

}  // namespace vbagg
