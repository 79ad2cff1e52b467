#include "params.hpp"

#include <sstream>

#include "core/model.hpp"
#include "io/data_config.hpp"
#include "settings.hpp"

namespace vbagg::cli {

namespace {

using T = ParamType;
const double kInf = 1e308;

std::string comma_list(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

std::vector<std::string> with_auto(std::vector<std::string> names) {
  names.insert(names.begin(), "auto");
  return names;
}

std::vector<Param> make_params() {
  // One setting per block of lines, in the order key, type, default, choices, min, max, help.
  // clang-format off
  return {
      // data
      {"data.covariates",
       T::layer_list,
       "",
       {},
       -kInf,
       kInf,
       "Covariate rasters, a list of {path, name, resampling, series}. Every band of a file is one covariate "
       "(named name, or name_<band description> for multi-band files; name defaults to the file's stem). "
       "resampling (default " + std::string(io::kCovariateResampling) + ") brings the raster onto the reference "
       "grid: one of " + comma_list(io::resampling_names()) + ". With data.time a covariate is static, or a series: "
       "a path with {period}, {year} or {month} (one file per period, e.g. rain_{period}.tif; named after the "
       "stem without the pattern), or series: bands (one file, band k for the k-th period of data.time)."},
      {"data.population.path", T::path, "", {}, -kInf, kInf, "Population raster (people per pixel)."},
      {"data.population.resampling",
       T::choice,
       io::kPopulationResampling,
       io::resampling_names(),
       -kInf,
       kInf,
       "How population is brought onto the reference grid; sum keeps totals."},
      {"data.units.path",
       T::path,
       "",
       {},
       -kInf,
       kInf,
       "Administrative units: any OGR vector source (.gpkg, .shp, .geojson)."},
      {"data.units.layer",
       T::text,
       "''",
       {},
       -kInf,
       kInf,
       "Layer of the units source; may be empty when it has one layer."},
      {"data.units.id_field", T::text, "", {}, -kInf, kInf, "Field holding each unit's id (text or integer)."},
      {"data.units.response_field",
       T::text,
       "",
       {},
       -kInf,
       kInf,
       "Field holding each unit's observation (case count): integer, real or numeric text."},
      {"data.units.trials_field",
       T::text,
       "''",
       {},
       -kInf,
       kInf,
       "Binomial data: the field holding the number tested in each unit or survey cluster (the response field "
       "then holds the positives). Needs model.likelihood binomial, which needs it."},
      {"data.units.response_table",
       T::path,
       "''",
       {},
       -kInf,
       kInf,
       "With data.time, the long layout: a table (CSV or any OGR table) with one row per unit and period, holding "
       "data.units.id_field, data.units.period_field and data.units.response_field (and trials_field). Empty: the "
       "units hold a field per period, response_field being a pattern such as cases_{year}{month}. A unit with no "
       "row for a period is unusable for that period (data.on_bad_unit); two rows for one unit and period are an "
       "error."},
      {"data.units.period_field",
       T::text,
       "period",
       {},
       -kInf,
       kInf,
       "The column of data.units.response_table holding each row's period: YYYY-MM, YYYYMM, YYYY-MM-DD (its month) "
       "or YYYY."},
      {"data.units.point_buffer",
       T::real,
       "-1",
       {},
       -1,
       1e12,
       "Survey points as units (clusters of a prevalence survey): 0 makes a point's bag the grid pixel it falls "
       "in; a positive radius, in the grid CRS's units (degrees for a geographic grid), a disc around it. "
       "Negative: point features are refused."},
      {"data.sources",
       T::source_list,
       "[]",
       {},
       -kInf,
       kInf,
       "Several data sources in one fit, instead of data.units: a list of maps, each with the data.units keys "
       "(path, layer, id_field, response_field, trials_field, point_buffer) and name (required with two or more; "
       "units of the second and later sources are called <name>:<id> in outputs), likelihood (default "
       "model.likelihood, or binomial with a trials_field), and optionally covariates and population of its own "
       "(another year of the same covariates, on the same grid; same covariate names), link (default model.link, else "
       "the likelihood's first) and task (the quantity it observes, e.g. incidence or prevalence; default the first "
       "source's). Sources of one task share its link and latent field; several tasks share model.latents latent "
       "fields with learned weights and get maps each (docs/sources.md). The first source's units are the primary "
       "ones (units.csv lists all)."},
      {"data.time",
       T::text,
       "''",
       {},
       -kInf,
       kInf,
       "Periods of a space-time fit: a range of months or years (2019-01..2020-12, 2015..2020), one period, or a "
       "list (2019-01, 2019-02, 2019-06, as text or a YAML list). Each bag is then a unit in one period (<id>@<period> in outputs), "
       "responses come per period (data.units.response_field pattern or data.units.response_table), covariates may "
       "be series, and data.population.path may hold {year} or {period}. Empty: one period (docs/space-time.md)."},
      {"data.grid",
       T::text,
       "population",
       {},
       -kInf,
       kInf,
       "Reference grid every layer is aligned to: 'population', the name of a covariate, or a raster path."},
      {"data.grid_refine",
       T::integer,
       "1",
       {},
       1,
       16,
       "Divide each pixel of the reference grid into k x k for the working grid: population is spread over the "
       "smaller pixels (summed), covariates are resampled, and the maps come out at the finer resolution. Units "
       "smaller than the grid's pixels then get pixels of their own (see docs/input-pipeline.md)."},
      {"data.pixel_assignment",
       T::choice,
       "fraction",
       {"centre", "all_touched", "fraction"},
       -kInf,
       kInf,
       "Which pixels belong to a unit: centre inside, all touched, or every pixel weighted by its exact area share."},
      {"data.coordinates",
       T::boolean,
       "true",
       {},
       -kInf,
       kInf,
       "Add pixel-centre coordinates in km as inputs (needed by model.kernel.space)."},
      {"data.on_bad_unit",
       T::choice,
       "stop",
       {"stop", "drop"},
       -kInf,
       kInf,
       "Units with zero population, no pixels, a missing or negative response, a duplicate id or broken geometry: "
       "stop before training naming them all, or drop and list them."},
      {"data.on_missing_response",
       T::choice,
       "bad",
       {"bad", "predict"},
       -kInf,
       kInf,
       "A unit with no response (an empty field, or no row for a period in data.units.response_table): bad, a bad "
       "unit under data.on_bad_unit; or predict: kept without one, so that inducing points cover it and units.csv "
       "gives its predicted total and interval (split 'unobserved'), while no fit, holdout or score uses it. A "
       "binomial unit keeps its trials, which its predicted positives scale with."},
      // model
      {"model.kind",
       T::choice,
       "vbagg",
       model_kind_names(),
       -kInf,
       kInf,
       "Model to fit: vbagg (variational GP on the bags); baselines: bag_pixel (the same GP fitted to each unit "
       "collapsed to its population-weighted mean inputs), nystrom (MAP Poisson regression on Nystrom features of the "
       "same inducing points; no uncertainty), constant (each training unit's own rate; elsewhere the overall rate)."},
      {"model.prior_precision",
       T::real,
       "1",
       {},
       1e-12,
       1e12,
       "nystrom: precision 1/gamma^2 of the Gaussian prior on the feature weights."},
      {"model.likelihood",
       T::choice,
       "negative_binomial",
       likelihood_names(),
       -kInf,
       kInf,
       "Bag observation model: poisson counts; negative_binomial counts with a learned dispersion r (variance "
       "mu + mu^2/r), for counts that vary more than Poisson; normal values; exponential positive values; "
       "binomial positives among data.units.trials_field tested (prevalence surveys)."},
      {"model.link",
       T::choice,
       "auto",
       with_auto(link_names()),
       -kInf,
       kInf,
       "Link from the GP to the intensity: exp or square for the count likelihoods, identity for normal, exp for "
       "exponential, logit for binomial; auto: the likelihood's first (exp, identity or logit)."},
      {"model.expectation",
       T::choice,
       "auto",
       with_auto(expectation_names()),
       -kInf,
       kInf,
       "Expected log likelihood of a bag: bound (the Jensen lower bound of the paper; drops the posterior variance "
       "inside the log, so intervals come out narrow), delta (second-order delta method, keeps that variance; reads "
       "the within-bag covariance per model.covariance), or sample (an unbiased average over model.samples fresh "
       "draws of the latent field every optimiser step, for any likelihood and link; needs train.optimizer adam, "
       "which auto picks for it). The square link always uses its second-order expansion unless "
       "sample. The binomial has no bound; its delta takes the bag's prevalence as logit-normal with the prevalence's "
       "mean and variance under q (exact for a bag of one pixel). auto: delta where the likelihood has it, else "
       "bound."},
      {"model.latents",
       T::integer,
       "1",
       {},
       1,
       16,
       "Shared latent fields (docs/sources.md): the number Q of sparse GPs, each with its own kernel (the "
       "model.kernel form) and model.inducing.count inducing points, mixed into each task (data.sources[].task) "
       "with learned weights. 1 with one task is the plain model."},
      {"model.samples",
       T::integer,
       "8",
       {},
       1,
       100000,
       "model.expectation sample: draws of the latent field per bag and optimiser step."},
      {"model.residual_pixels",
       T::integer,
       "128",
       {},
       0,
       1e9,
       "The delta method (and the binomial's and normal's within-bag covariances) in a bag of more pixels than this: "
       "the residual variance of a pixel (the part of its prior variance the inducing points leave unexplained) is "
       "computed at this many pixels of the bag, each standing for a run of its neighbours. It weighs about 1/N of "
       "an N-pixel bag's variance, yet costs as much again as the rest of a pass; each pixel's own variance is exact "
       "whatever the value, and predictions never use the runs. 0: every pixel's own. The sampled expectation "
       "always takes every pixel's own."},
      {"model.mean_function",
       T::choice,
       "linear",
       {"constant", "linear"},
       -kInf,
       kInf,
       "Prior mean of the GP: constant (one learned mu) or linear (mu + beta^T x in the standardised covariates, "
       "beta learned with a Normal prior; the kernel then models what the linear part cannot, and the model nests "
       "the fixed effects + spatial field of R disaggregation). With counts and the exp link, mu and beta start from a "
       "Poisson regression of the units' counts on the covariates."},
      {"model.linear_prior_sd",
       T::real,
       "1",
       {},
       1e-6,
       1e6,
       "Prior sd of each coefficient beta of the linear mean (per sd of its covariate, on the log-rate scale for the "
       "exp link) and, with variational fixed effects, of the intercept's offset from mu."},
      {"model.fixed_effects",
       T::choice,
       "auto",
       with_auto(fixed_effects_names()),
       -kInf,
       kInf,
       "How the mean's intercept and coefficients are estimated: point (mu and beta as single values) or variational "
       "(the intercept's offset and beta are part of the Gaussian posterior with the field, so maps and intervals "
       "carry their uncertainty and the kernel is fitted integrated over them, as under REML; not for the MAP model, "
       "model.kind nystrom). auto: variational when the sources observe several tasks (each task's intercept and "
       "coefficients scale the shared fields: as point values they left a prevalence task's 95 % intervals covering "
       "67-76 % of the truth in two of three synthetic countries, variational and annealed 85-99 %), point "
       "otherwise (docs/experiments.md)."},
      {"model.point_uncertainty",
       T::choice,
       "auto",
       {"auto", "laplace", "none"},
       -kInf,
       kInf,
       "Whether maps and intervals carry the uncertainty of the point estimates (the kernel's hyperparameters, the "
       "mean and point fixed effects, the dispersion and the unit effect's sigma), which q alone takes as known. "
       "laplace: after the fit, a Laplace approximation of max_q ELBO over them (its Hessian by differences of "
       "the gradient, q following each change by natural-gradient steps: about 4 objective evaluations per "
       "parameter), and the derivative of the latent mean along each of its directions widens every pixel's and "
       "unit's interval and enters joint draws (docs/experiments.md). Where q's steps do not settle next to the "
       "fit (a few dozen units with a unit effect can take more than 50), q's response is read from the ELBO's "
       "Hessian in q and the point estimates instead, where q has at most 1,500 entries (one field of up to 53 "
       "inducing points; two objective evaluations per entry: 3.5 s for 32 on 17 provinces); past that train "
       "warns and leaves the spread out. none: the "
       "point estimates as known. Needs "
       "a deterministic expectation (bound or delta). auto: laplace for model.kind vbagg where it is defined, up "
       "to 200,000 training pixels (where it costs about a fifth of the fit; larger fits have more units to "
       "bound their parameters, and each reading is a pass over all their pixels)."},
      {"model.unit_effect",
       T::choice,
       "auto",
       {"auto", "true", "false"},
       -kInf,
       kInf,
       "A random effect u on every unit's linear predictor, with its sd sigma learned (the iid polygon effect of R "
       "disaggregation), integrated out of each unit's likelihood: for counts on the log rate, u ~ N(-sigma^2/2, "
       "sigma^2) so that E[e^u] = 1; for the binomial on the logit, u ~ N(0, sigma^2), each survey unit's or "
       "cluster's own departure from the map. It absorbs unit-level variation (reporting, local outbreaks, how a "
       "survey was drawn) that would otherwise bend the map. The maps show the field without it (for counts the "
       "expected rate, for prevalence that of a typical unit); unit totals and intervals include it (for a "
       "training unit its effect given its observation, for any other unit the prior spread). Defined for the "
       "count likelihoods and the binomial of model.kind vbagg and bag_pixel, with model.expectation delta or "
       "sample (not the exp link's bound); auto turns it on wherever it is defined."},
      {"model.unit_effect_scope",
       T::choice,
       "auto",
       {"auto", "unit", "period"},
       -kInf,
       kInf,
       "With data.time, what one unit effect covers: unit (one effect per unit, shared by all its periods: a "
       "district that reports high every month, integrated out of the unit's months jointly, and a held-out month "
       "of a training unit borrows its other months' effect) or period (one effect per unit and period, "
       "independent from month to month). unit needs the exp link, model.expectation delta and model.covariance "
       "nystrom; auto is unit there and period elsewhere. Without data.time every unit has one bag and both are "
       "the same."},
      {"model.unit_effect_prior_sd",
       T::real,
       "0",
       {},
       0,
       1e3,
       "Penalised-complexity prior on the unit effect's sigma (as R disaggregation's iid effect): sigma ~ "
       "Exponential with P(sigma > this) = model.unit_effect_prior_prob, which pulls sigma toward 0 and so leaves "
       "more of the differences between units to the smooth field. 0: no prior, sigma at its maximum-ELBO value. "
       "R disaggregation uses 0.1 with probability 0.01; on synthetic countries it changed calibration little "
       "(docs/experiments.md)."},
      {"model.unit_effect_prior_prob",
       T::real,
       "0.01",
       {},
       1e-12,
       0.999999,
       "With model.unit_effect_prior_sd: the prior probability that the unit effect's sigma exceeds that sd."},
      {"model.covariance",
       T::choice,
       "nystrom",
       covariance_mode_names(),
       -kInf,
       kInf,
       "Within-bag covariance for the square link, the delta method and the normal model: nystrom O(N M^2) or "
       "exact O(N^2 M)."},
      {"model.aggregation",
       T::choice,
       "sum",
       aggregation_names(),
       -kInf,
       kInf,
       "Normal model: the bag value is the population-weighted sum or mean of the pixel values."},
      {"model.kernel.covariates",
       T::choice,
       "ard",
       {"ard", "ard+additive", "rbf", "matern12", "matern32", "matern52", "none"},
       -kInf,
       kInf,
       "Kernel on the standardised covariates. ard: one squared exponential over all of them with a lengthscale "
       "each, so it models their interactions (a covariate whose lengthscale grows long drops out of it). "
       "ard+additive: the ard and, added to it, a squared exponential on each covariate alone with its own "
       "variance and lengthscale, so that a hump in one covariate and a threshold in another are learned beside "
       "the interactions. On 200-unit synthetic countries whose covariates act through a hump, a threshold and an "
       "interaction (unit noise 0.3) it lowered the pixel MSE by 40 % and the calibration error from 0.086 to "
       "0.056, and was level on a log-linear truth. Each covariate adds a part to every pass: with four a fit "
       "takes about twice as long, with 18 a pass costs about 4x ard's (docs/experiments.md, docs/benchmarks.md). "
       "none: the linear mean alone acts on the covariates (R disaggregation's fixed effects). With about a hundred "
       "units whose counts vary far beyond Poisson, ard can learn a function of a covariate that the truth does "
       "not have: on twelve synthetic countries of 109 units (unit noise 0.7) with a log-linear truth, none's "
       "pixel MSE was a fifth lower than ard's; where the covariates act nonlinearly, none's was higher and its "
       "intervals too narrow (95 % coverage 0.78 against 0.90). Counts that noisy do not tell the two apart: "
       "blocked cross-validation of the counts (vbagg-eval --cv 5) picked the more accurate map in 8 of those 18 "
       "countries. ard is the safer choice where nothing is known of how the covariates act; none, where they are "
       "known to act log-linearly (docs/experiments.md)."},
      {"model.kernel.space",
       T::choice,
       "auto",
       {"auto", "matern12", "matern32", "matern52", "rbf", "none"},
       -kInf,
       kInf,
       "Kernel on the coordinates (km); needs data.coordinates. The Matern kernels allow rougher maps; with the few "
       "inducing points that unit data support, their roughness between inducing points is prior variance and "
       "widens the pixel intervals beyond their nominal coverage (docs/experiments.md). A space-time fit has many "
       "bags per unit and the reverse holds: rbf's intervals are too narrow there (docs/space-time.md). auto: rbf, "
       "or matern52 with data.time."},
      {"model.kernel.space_prior",
       T::choice,
       "auto",
       {"auto", "true", "false"},
       -kInf,
       kInf,
       "Normal priors on the space kernel's log variance and log lengthscale (sd model.kernel.space_prior_sd), "
       "centred on the data's own scales: the variance of the training units' log rates (logits for surveys) that "
       "their mean covariates leave, and a quarter of the diagonal of every unit's bounding box (km). Where the units "
       "that report cover part of the area (units without counts, data.on_missing_response: predict), the field "
       "fitted on them alone may lose its variance or stretch into a constant, and the rest of the map is predicted "
       "too confidently; the priors keep it, and where every unit reports the data outweigh them "
       "(docs/experiments.md). With data.time the space kernel's variance is the time kernel's, and only its "
       "lengthscale would have a prior. auto: true for one period, false with data.time."},
      {"model.kernel.space_prior_sd",
       T::real,
       "1",
       {},
       0,
       kInf,
       "The sd of model.kernel.space_prior's normal priors on the log scale: 1 lets the variance and the lengthscale "
       "sit a factor e from their centres at the cost of half a nat each."},
      {"model.kernel.time",
       T::choice,
       "auto",
       {"auto", "seasonal+trend", "seasonal", "trend", "none"},
       -kInf,
       kInf,
       "With data.time, the kernel on time, multiplied by model.kernel.space (the covariate kernel is added): "
       "seasonal is periodic with a one-year period, trend a smooth rbf on time in years; their variances and "
       "lengthscales are learned. auto: seasonal+trend for months, trend for years, none without data.time."},
      {"model.kernel.season",
       T::choice,
       "auto",
       {"auto", "periodic", "cycle"},
       -kInf,
       kInf,
       "The seasonal part of model.kernel.time. periodic: an rbf on the season as a point on the circle, whose "
       "constant share (most of it at long lengthscales) acts as a static field beside the season; cycle: the same "
       "less its mean over the year, so that the season's amplitude is learned apart from the static field (the trend "
       "part's), and a long lengthscale gives a pure annual harmonic. auto: periodic."},
      {"model.kernel.space_time",
       T::choice,
       "auto",
       {"auto", "shared", "separate"},
       -kInf,
       kInf,
       "With model.kernel.time seasonal+trend, how model.kernel.space enters: shared multiplies one space kernel by "
       "the sum of the time parts, so the season's spatial pattern and the static field (the trend part's, and the "
       "periodic season's constant share) have one lengthscale; separate gives each time part a space kernel of its "
       "own (space x season + space x trend), at the cost of a second spatial distance per pass. auto: shared."},
      {"model.inducing.count",
       T::integer,
       "0",
       {},
       0,
       100000,
       "Number of inducing points M; 0 chooses it from the problem: one per three training units, at least 32 and at "
       "most 200 (bag counts resolve the map no finer than the units, and a pass costs M^2 per pixel). With several "
       "data.sources, one per three training units of the source with the most: sources of one field resolve it no "
       "finer than the densest of them. Counting every source's units (102 for 96 districts, 16 provinces and 192 "
       "survey clusters) gave maps no better than 64, for 1.5 times the fit time, and 3 times for a survey's 96 "
       "units and 192 clusters (docs/experiments.md)."},
      {"model.inducing.init", T::choice, "kmeans++", {"kmeans++"}, -kInf, kInf, "Inducing-point initialisation."},
      {"model.inducing.learn_locations", T::boolean, "false", {}, -kInf, kInf, "Optimise the inducing inputs too."},
      {"model.jitter",
       T::real,
       "1e-6",
       {},
       1e-12,
       0.1,
       "Relative jitter added to K_WW; raised automatically when needed."},
      // train
      {"train.optimizer",
       T::choice,
       "auto",
       {"auto", "adam", "lbfgs", "natgrad"},
       -kInf,
       kInf,
       "auto: lbfgs up to 200,000 training pixels, natgrad above (adam for model.kind nystrom, which has no q for "
       "natural-gradient steps); adam wherever model.expectation is sample. adam: minibatches of bags; lbfgs: full "
       "batch (one epoch = one objective evaluation), followed by train.polish; natgrad: natural-gradient steps for "
       "q(v) and Adam for the kernel and mean on the same minibatches (fewer epochs on large problems; not for "
       "model.kind nystrom, a point estimate)."},
      {"train.learning_rate", T::real, "0.01", {}, 1e-12, 10, "Adam step size."},
      {"train.natgrad_step", T::real, "0.1", {}, 1e-6, 1, "natgrad: size of the natural-gradient steps for q(v)."},
      {"train.schedule",
       T::choice,
       "auto",
       {"auto", "constant", "cosine", "anneal"},
       -kInf,
       kInf,
       "adam and natgrad: how the learning rate and natural-gradient step change over the epochs. constant: they "
       "keep their values. cosine: they fall along half a cosine to 0 at the last epoch (set train.epochs to the "
       "budget: the fit runs them all unless train.tolerance or early stopping ends it sooner). anneal: they keep "
       "their values until the objective levels off (train.tolerance) or half of train.epochs have run, then fall "
       "along half a cosine to 0 over as many epochs again, and the fit ends there. At constant steps q's "
       "covariance jitters around its optimum and every jitter widens the intervals: with the sampled expectation "
       "and model.fixed_effects variational a binomial fit's 50 % intervals covered 88 % of the truth, 54 % "
       "annealed over 1000 epochs; with point fixed effects annealing made the maps more accurate but the "
       "cross-validated intervals narrower (docs/experiments.md). auto: anneal for a fit of several tasks (with "
       "their variational fixed effects, see model.fixed_effects), constant otherwise."},
      {"train.epochs",
       T::integer,
       "0",
       {},
       0,
       10000000,
       "Maximum number of epochs (for L-BFGS: objective evaluations). 0 chooses it from the problem: for an L-BFGS "
       "fit of several periods (data.time), whose unit effects take part of the field early and give it back only "
       "slowly, 400 when the polish follows (train.polish) and 1500 when it does not; for an L-BFGS fit of one "
       "period, 100 when the polish follows (it gains the last nats in fewer passes than L-BFGS, whose budget "
       "also bounds the polish's); 1000 for an adam or natgrad fit of several tasks, whose annealed steps need "
       "the room; else 300. The negative_binomial likelihood and "
       "the unit effect are fitted in two stages: first with the dispersion and the effect held at their start "
       "(train.first_stage_epochs), then with everything free (this many)."},
      {"train.first_stage_epochs",
       T::integer,
       "50",
       {},
       1,
       10000000,
       "Staged fits (negative_binomial, model.unit_effect): epochs of the first stage, which only has to bring the "
       "map off the prior before the noise model is learned; a long one fits the map to noise."},
      {"train.polish",
       T::integer,
       "auto",
       {"auto"},
       0,
       10000000,
       "lbfgs and natgrad: after the epochs, at most this many full-batch evaluations (three passes over the data "
       "each) of quasi-Newton steps on the kernel, mean and noise parameters, with q following by natural-gradient "
       "steps; each accepted step is one more epoch in history.csv, and the polish ends where no step improves the "
       "objective or where train.tolerance ends it. L-BFGS over q's many entries and the rest together can stop "
       "far from the optimum where the counts pin the map: on 200-unit synthetic countries without unit noise the "
       "polish after it halved the pixel MSE and brought intervals that were up to twice too wide to calibrated "
       "(docs/experiments.md). Minibatch steps leave the kernel and mean short of their optimum long after q has "
       "settled: on the 300,000-pixel benchmark country 30 natgrad epochs ended 16 % below where a polish after "
       "them ended, and the polish came within 0.1 % of that end in 165 s (docs/benchmarks.md, \"Time to fit\"). "
       "On 21-month synthetic countries 400 L-BFGS evaluations and the polish reached a higher objective than "
       "L-BFGS alone in 20-45 % less time, with maps about as accurate; with two tasks on a shared field, 100 "
       "evaluations and the polish gave three countries more accurate and better calibrated incidence maps "
       "than 300 evaluations alone, in less time (docs/experiments.md). Not for model.kind nystrom (no q). auto: "
       "300, or train.epochs if fewer, after an lbfgs fit of a variational model (where it was measured), else 0 "
       "(none)."},
      {"train.batch_bags",
       T::integer,
       "16",
       {},
       1,
       10000000,
       "Bags per minibatch of Adam and natural-gradient steps. With a unit effect shared by a unit's periods "
       "(model.unit_effect_scope) a minibatch holds whole units: as many as make at least this many bags."},
      {"train.tolerance",
       T::real,
       "1e-5",
       {},
       0,
       1,
       "Stop when the objective (for L-BFGS the best value so far) moved by less than this, relative, over the "
       "last 10 epochs; 0 is off."},
      {"train.lbfgs_memory",
       T::integer,
       "10",
       {},
       1,
       1000,
       "lbfgs: how many past steps the quasi-Newton curvature is built from. More costs two vectors of every "
       "parameter per step and a little arithmetic, nothing per pass over the data. On 21-month synthetic countries "
       "(docs/experiments.md) 30 converged in 31 % fewer evaluations than 10, to the same objective within a nat, "
       "with maps a few per cent less accurate and calibration moving both ways; the defaults were calibrated with "
       "10."},
      {"train.patience",
       T::integer,
       "0",
       {},
       0,
       10000000,
       "Early stopping: epochs without improvement of the holdout NLL before stopping (the best epoch is kept); 0 is "
       "off. L-BFGS scores the holdout every 10 evaluations."},
      {"train.seed", T::integer, "1", {}, 0, 9.2e18, "Seed of inducing points, minibatches and initialisation."},
      {"train.threads", T::integer, "0", {}, 0, 4096, "Threads; 0 uses every core. Where other work shares the cores, run with OMP_WAIT_POLICY=passive in the environment: threads waiting for work then sleep rather than spin (docs/benchmarks.md, section 9)."},
      {"train.holdout.fraction", T::real, "0.2", {}, 0, 0.9, "Fraction of units kept out of training for evaluation."},
      {"train.holdout.seed", T::integer, "1", {}, 0, 9.2e18, "Seed of the train/holdout split."},
      {"train.holdout.periods",
       T::text,
       "''",
       {},
       -kInf,
       kInf,
       "With data.time, whole periods kept out of training, in the form of data.time (2020-10..2020-12): every unit "
       "of those periods is held out, beside train.holdout.fraction of the other periods' units (0 holds out the "
       "periods alone). Scores a fit on months it has not seen."},
      // predict
      {"predict.quantiles", T::real_list, "[0.025, 0.975]", {}, 0, 1, "Quantile levels of the intensity maps."},
      {"predict.exceedance",
       T::real_list,
       "[]",
       {},
       -kInf,
       kInf,
       "Thresholds t of P(intensity > t) maps, in the unit of the intensity maps (see predict.rate_per)."},
      {"predict.rate_per",
       T::real,
       "1",
       {},
       1e-9,
       1e12,
       "Intensity maps as cases per this many people: 1 (per person) or, e.g., 1000 (per 1,000). The maps' "
       "unit and VBAGG_RATE_PER metadata say which. Count likelihoods only."},
      {"predict.style",
       T::choice,
       "qgis",
       {"qgis", "none"},
       -kInf,
       kInf,
       "qgis: beside each map a <map>.qml that QGIS loads as its style (a perceptual colour ramp with limits "
       "from the map's 2nd to 98th percentiles, shared by the mean and its quantile maps, the unit in the "
       "legend), and graduated styles in units.gpkg; none: no styles."},
      {"predict.samples",
       T::integer,
       "500",
       {},
       10,
       1000000,
       "Posterior samples for each unit's predicted-total interval."},
      {"predict.spans",
       T::text,
       "''",
       {},
       -kInf,
       kInf,
       "A space-time model's spans of periods to average, separated by ';' (2019-01..2019-12; 2020-01..2020-12): "
       "per span, maps of the mean intensity over its periods (intensity_mean_<from>_<to>.tif) with its sd and "
       "predict.quantiles, from joint draws over the periods at each pixel (predict.samples of them), not from "
       "averaging the periods' sds. --span adds more."},
      {"predict.strip_rows",
       T::integer,
       "0",
       {},
       0,
       1000000,
       "Grid rows predicted at a time; 0: about 2^20 pixels and at most 256 rows, which bounds the memory. "
       "units.csv is built from batches of units holding about as many pixels (a larger unit alone). Under "
       "mpirun the processes take turns at the strips, so smaller strips spread a small grid over more "
       "processes."},
      // output
      {"output.dir", T::path, "out", {}, -kInf, kInf, "Output folder."},
  };
  // clang-format on
}

}  // namespace

const std::vector<Param>& all_params() {
  static const std::vector<Param> params = make_params();
  return params;
}

const Param* find_param(const std::string& key) {
  for (const auto& p : all_params())
    if (p.key == key) return &p;
  return nullptr;
}

std::string type_name(ParamType t) {
  switch (t) {
    case T::text:
      return "text";
    case T::path:
      return "path";
    case T::integer:
      return "integer";
    case T::real:
      return "number";
    case T::boolean:
      return "true/false";
    case T::choice:
      return "choice";
    case T::real_list:
      return "list of numbers";
    case T::layer_list:
      return "list of layers";
    case T::source_list:
      return "list of sources";
  }
  return "?";
}

std::string configuration_markdown() {
  std::ostringstream s;
  s << "# Configuration reference\n\n"
    << "Generated from `src/cli/params.cpp` (`vbagg-train --markdown-config`); a test keeps this page equal to it.\n\n"
    << "Settings live in a YAML file (`--config run.yaml`); any key can be overridden on the command line with "
    << "`--set key=value` (e.g. `--set model.link=square`). Paths are relative to the config file's folder. "
    << "Every run saves the settings as used, defaults filled in, to `run.resolved.yaml`.\n\n"
    << "| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n";
  for (const auto& p : all_params()) {
    std::string allowed;
    for (const auto& c : p.choices) allowed += (allowed.empty() ? "" : ", ") + ("`" + c + "`");
    if ((p.type == T::integer || p.type == T::real || p.type == T::real_list) && (p.min > -1e307 || p.max < 1e307)) {
      std::ostringstream range;
      range << (p.min > -1e307 ? "≥ " : "");
      if (p.min > -1e307) range << p.min;
      if (p.max < 1e307) range << (p.min > -1e307 ? ", " : "") << "≤ " << p.max;
      allowed += (allowed.empty() ? "" : "; ") + range.str();
    }
    s << "| `" << p.key << "` | " << type_name(p.type) << " | "
      << (p.default_yaml.empty() ? "*required*" : "`" + p.default_yaml + "`") << " | " << allowed << " | " << p.help
      << " |\n";
  }
  return s.str();
}

}  // namespace vbagg::cli
