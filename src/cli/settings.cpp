#include "settings.hpp"

#include <cmath>

namespace vbagg::cli {

namespace {

// Reads keys of a validated configuration, remembering which.
struct Reader {
  const Config& c;
  std::vector<std::string>* keys;
  const std::string& key(const std::string& k) {
    if (keys) keys->push_back(k);
    return k;
  }
  std::string text(const std::string& k) { return c.text(key(k)); }
  double real(const std::string& k) { return c.real(key(k)); }
  long long integer(const std::string& k) { return c.integer(key(k)); }
  bool boolean(const std::string& k) { return c.boolean(key(k)); }
  std::vector<double> reals(const std::string& k) { return c.reals(key(k)); }
  std::string path(const std::string& k) { return c.path(key(k)); }
};

}  // namespace

Settings settings_of(const Config& config, std::vector<std::string>* keys) {
  Reader r{config, keys};
  Settings s;
  Settings::Model& m = s.model;
  m.kind = parse_model_kind(r.text("model.kind"));
  m.spec.prior_precision = r.real("model.prior_precision");
  m.spec.likelihood = parse_likelihood(r.text("model.likelihood"));
  const std::string link = r.text("model.link"), expectation = r.text("model.expectation");
  if (link != "auto") m.link = parse_link(link);
  if (expectation != "auto") m.expectation = parse_expectation(expectation);
  m.spec.samples = static_cast<int>(r.integer("model.samples"));
  m.spec.residual_pixels = r.integer("model.residual_pixels");
  m.linear_mean = r.text("model.mean_function") == "linear";
  m.spec.linear_prior_sd = r.real("model.linear_prior_sd");
  const std::string fixed_effects = r.text("model.fixed_effects");
  if (fixed_effects != "auto") m.fixed_effects = parse_fixed_effects(fixed_effects);
  const std::string unit_effect = r.text("model.unit_effect");
  if (unit_effect != "auto") m.unit_effect = unit_effect == "true";
  m.unit_effect_scope = r.text("model.unit_effect_scope");
  const std::string point_uncertainty = r.text("model.point_uncertainty");
  if (point_uncertainty != "auto") m.point_spread = point_uncertainty == "laplace";
  // sigma_u ~ Exponential(rate) with P(sigma_u > sd) = prob.
  const double prior_sd = r.real("model.unit_effect_prior_sd"), prior_prob = r.real("model.unit_effect_prior_prob");
  m.spec.unit_effect_prior_rate = prior_sd > 0 ? -std::log(prior_prob) / prior_sd : 0;
  m.spec.covariance = parse_covariance_mode(r.text("model.covariance"));
  m.spec.aggregation = parse_aggregation(r.text("model.aggregation"));
  m.spec.latents = r.integer("model.latents");
  m.kernel_covariates = r.text("model.kernel.covariates");
  m.kernel_space = r.text("model.kernel.space");
  m.kernel_time = r.text("model.kernel.time");
  m.kernel_season = r.text("model.kernel.season");
  m.kernel_space_time = r.text("model.kernel.space_time");
  const std::string space_prior = r.text("model.kernel.space_prior");
  if (space_prior != "auto") m.space_prior = space_prior == "true";
  m.space_prior_sd = r.real("model.kernel.space_prior_sd");
  m.inducing_count = r.integer("model.inducing.count");
  m.inducing_init = r.text("model.inducing.init");
  m.spec.learn_inducing = r.boolean("model.inducing.learn_locations");
  m.jitter = r.real("model.jitter");

  Settings::Train& t = s.train;
  const std::string optimizer = r.text("train.optimizer");
  if (optimizer != "auto") t.optimizer = parse_optimizer(optimizer);
  t.learning_rate = r.real("train.learning_rate");
  t.natgrad_step = r.real("train.natgrad_step");
  const std::string schedule = r.text("train.schedule");
  if (schedule != "auto") t.schedule = parse_schedule(schedule);
  t.epochs = static_cast<int>(r.integer("train.epochs"));
  t.first_stage_epochs = static_cast<int>(r.integer("train.first_stage_epochs"));
  if (r.text("train.polish") != "auto") t.polish = static_cast<int>(r.integer("train.polish"));
  t.batch_bags = r.integer("train.batch_bags");
  t.tolerance = r.real("train.tolerance");
  t.lbfgs_memory = static_cast<int>(r.integer("train.lbfgs_memory"));
  t.patience = static_cast<int>(r.integer("train.patience"));
  t.seed = static_cast<unsigned long long>(r.integer("train.seed"));
  t.threads = static_cast<int>(r.integer("train.threads"));
  t.holdout_fraction = r.real("train.holdout.fraction");
  t.holdout_seed = static_cast<unsigned long long>(r.integer("train.holdout.seed"));
  t.holdout_periods = r.text("train.holdout.periods");

  s.predict.quantiles = r.reals("predict.quantiles");
  s.predict.exceedance = r.reals("predict.exceedance");
  s.predict.samples = static_cast<int>(r.integer("predict.samples"));
  s.predict.strip_rows = static_cast<int>(r.integer("predict.strip_rows"));
  s.predict.rate_per = r.real("predict.rate_per");
  s.predict.qgis_style = r.text("predict.style") == "qgis";
  {
    const std::string spans = r.text("predict.spans");
    for (size_t start = 0; start < spans.size();) {
      const size_t end = std::min(spans.find(';', start), spans.size());
      const std::string one = spans.substr(start, end - start);
      const auto b = one.find_first_not_of(" \t");
      if (b != std::string::npos) s.predict.spans.push_back(one.substr(b, one.find_last_not_of(" \t") - b + 1));
      start = end + 1;
    }
  }
  s.output_dir = r.path("output.dir");
  s.trials_field = config.text("data.units.trials_field");
  const YAML::Node time = config.root()["data"]["time"];
  // Only whether periods are given: the data configuration reads them and names a malformed value.
  s.periods = time && ((time.IsSequence() && time.size() > 0) || (time.IsScalar() && !time.Scalar().empty()));
  const YAML::Node sources = config.root()["data"]["sources"];
  for (size_t i = 0; sources && sources.IsSequence() && i < sources.size(); ++i) {
    const YAML::Node e = sources[i];
    Settings::Source src;
    src.name = e["name"] ? e["name"].as<std::string>() : "";
    if (e["likelihood"]) src.likelihood = parse_likelihood(e["likelihood"].as<std::string>());
    src.trials = e["trials_field"] && !e["trials_field"].as<std::string>().empty();
    if (e["link"] && e["link"].as<std::string>() != "auto") src.link = parse_link(e["link"].as<std::string>());
    if (e["task"]) src.task = e["task"].as<std::string>();
    s.sources.push_back(src);
  }
  return s;
}

}  // namespace vbagg::cli
