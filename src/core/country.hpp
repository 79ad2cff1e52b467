// The synthetic country of MODEL.md section 10: smooth covariate fields, a population field,
// units as a discrete Voronoi partition of the grid, a true intensity and unit counts.
#pragma once

#include <string>
#include <vector>

#include "types.hpp"

namespace vbagg {

struct CountryOptions {
  int width = 160, height = 120;  // pixels
  int units = 60;
  int covariates = 4;
  // Overdispersion: each unit's expected count is multiplied by e^{u_a}, u_a ~ N(-sd^2/2, sd^2)
  // (mean factor 1), before its count is drawn, as real counts vary more than Poisson.
  double unit_noise_sd = 0;
  // Overdispersion of the surveys: each survey unit's and each cluster's prevalence is
  // sigma(logit pi + e) with e ~ N(0, sd^2) of its own (households, the season, the survey team),
  // before its positives are drawn. The true prevalence map is unchanged.
  double survey_noise_sd = 0;
  // Random Fourier features of the latent field g (40: every country before this option). With
  // more, g is closer to a draw of a Gaussian process with field_kernel's kernel; the covariates,
  // population, units and every other stream are the same whatever their number.
  int field_frequencies = 40;
  // The kernel whose spectrum the field's frequencies are drawn from, at the same lengthscale: rbf
  // (every country before this option; smooth at every scale) or Matérn 5/2 (a power-law tail:
  // more variation at fine scales), so that a comparison of space kernels need not run on the
  // rbf's own truth. The frequencies share their directions and phases, and the rest of the
  // country is the same.
  enum class FieldKernel { rbf, matern52 };
  FieldKernel field_kernel = FieldKernel::rbf;
  // How the covariates enter log lambda: linear (beta' x, the model class of R disaggregation's
  // fixed effects) or nonlinear (a hump in the first, a threshold in the second, the product of
  // the third and fourth, linear in the rest; see add_covariate_effect), which no linear mean can follow.
  enum class CovariateEffects { linear, nonlinear };
  CovariateEffects covariate_effects = CovariateEffects::linear;
  // Months of a seasonal country (0: none), from January of first_year.
  int months = 0;
  int first_year = 2019;
  unsigned long long seed = 1;
};

struct Country {
  int width = 0, height = 0;
  std::vector<std::string> covariate_names;
  std::vector<Vector> covariates;  // each width*height, row-major; NaN in the lake (missing data)
  Vector population;               // people per pixel (0 in the lake)
  Vector intensity;                // true lambda: cases per person
  Vector field;                    // the smooth spatial part g of log lambda (sd 0.5 over the grid)
  std::vector<int> unit_of_pixel;  // 0-based unit index per pixel
  Vector counts;                   // y_a ~ Poisson(e^{u_a} sum over the unit's pixels of p_i lambda_i)
  Vector expected;                 // sum over the unit's pixels of p_i lambda_i (before e^{u_a})
  Vector unit_effect;              // u_a (all 0 without overdispersion)
  // A prevalence survey of the same country: the true prevalence sigma(f_i) of the same latent
  // field on the logit scale (about 20 % on average), and per unit the number tested and
  // positives ~ Binomial(tested, population-weighted mean prevalence of the unit, moved by the
  // survey noise on its logit).
  Vector prevalence, tested, positives;
  // True coefficients of the standardised covariates (with nonlinear effects, only those of the
  // covariates the nonlinear terms leave enter; the rest are drawn all the same, so every later
  // draw stays the same).
  std::vector<double> beta;
  Vector covariate_effect;  // the covariates' part of log lambda at each pixel (mean 0 if nonlinear)
  // Coarser units over the same country: each unit lies in the province of the nearest of
  // max(2, units / 6) province seeds, and each province reports its own count (another year's:
  // y_p ~ Poisson(e^{u_p} sum of its pixels' p_i lambda_i), u_p like u_a).
  std::vector<int> province_of_unit;
  Vector province_counts;
  // A cluster survey (as household surveys sample): twice as many clusters as units, each at a pixel
  // drawn by population, tested 20 to 40 people, positives ~ Binomial(tested, prevalence there,
  // moved by the survey noise on its logit).
  std::vector<Index> cluster_pixel;
  Vector cluster_tested, cluster_positives;
  // A seasonal country (CountryOptions::months): per month m, the monthly intensity
  // lambda_im = lambda_i / 12 exp(a_i cos(2 pi (t_m - phi_i)) + trend (t_m - T / 2)) with a smooth
  // amplitude a_i and peak phi_i, t_m the month's middle in years; a rainfall that peaks a month
  // before the cases (NaN in the lake); and counts y_am ~ Poisson(e^{u_a} sum_i p_i lambda_im).
  std::vector<Vector> monthly_intensity, monthly_rain;
  Matrix monthly_counts;  // units x months
};

// Deterministic for a seed. Coordinates of the fields are in pixel units.
Country make_country(const CountryOptions& options);

}  // namespace vbagg
