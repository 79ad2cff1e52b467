#include "model_file.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "atomic_file.hpp"
#include "core/likelihood.hpp"
#include "core/point_spread.hpp"
#include "core/types.hpp"

namespace vbagg::io {

namespace {

// yaml-cpp writes doubles with the emitter's precision; .nan/.inf keep non-finite values.
void emit_vector(YAML::Emitter& out, const Vector& v) {
  out << YAML::Flow << YAML::BeginSeq;
  for (Index i = 0; i < v.size(); ++i) out << v[i];
  out << YAML::EndSeq;
}

void emit_strings(YAML::Emitter& out, const std::vector<std::string>& v) {
  out << YAML::Flow << YAML::BeginSeq;
  for (const auto& s : v) out << s;
  out << YAML::EndSeq;
}

// One source's own parameters, named by its likelihood, and its unit effect: sigma_u and the
// training units, whose own effects predictions condition on their counts. `view` is the model as
// that source sees it (Model::for_source).
void emit_source_parameters(YAML::Emitter& out, const Model& view) {
  const std::vector<std::string> lik_names = likelihood_of(view.spec.likelihood).param_names();
  for (size_t k = 0; k < lik_names.size(); ++k)
    out << YAML::Key << lik_names[k] << YAML::Value << view.likelihood_params[static_cast<Index>(k)];
  if (view.spec.unit_effect) {
    out << YAML::Key << "unit_effect" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "log_sd" << YAML::Value << view.unit_effect.log_sd;
    if (view.spec.unit_effect_shared) out << YAML::Key << "shared" << YAML::Value << true;
    out << YAML::Key << "units" << YAML::Value;
    emit_strings(out, view.unit_effect.units);
    if (!view.unit_effect.posterior.empty()) {
      out << YAML::Key << "posterior" << YAML::Value << YAML::BeginMap;
      for (const auto& [unit, u] : view.unit_effect.posterior) {
        out << YAML::Key << unit << YAML::Value << YAML::Flow << YAML::BeginSeq << u.mean << u.var;
        if (u.loading.size() > 0) {
          out << u.shift;
          for (Index k = 0; k < u.loading.size(); ++k) out << u.loading[k];
        }
        out << YAML::EndSeq;
      }
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
}

// A kernel as a list of its parts. The parts of a kernel that is not a plain sum carry their term
// and factor (a factor of a product with its variance fixed says so).
void emit_kernel(YAML::Emitter& out, const Kernel& kernel) {
  std::vector<std::pair<size_t, size_t>> place(kernel.parts().size());
  for (size_t t = 0; t < kernel.terms().size(); ++t)
    for (size_t f = 0; f < kernel.terms()[t].size(); ++f)
      for (Index c : kernel.terms()[t][f]) place[static_cast<size_t>(c)] = {t, f};
  out << YAML::BeginSeq;
  for (size_t c = 0; c < kernel.parts().size(); ++c) {
    const auto& p = kernel.parts()[c];
    out << YAML::BeginMap;
    if (!kernel.is_sum()) {
      out << YAML::Key << "term" << YAML::Value << place[c].first;
      out << YAML::Key << "factor" << YAML::Value << place[c].second;
      if (p.fixed_variance) out << YAML::Key << "fixed_variance" << YAML::Value << true;
    }
    out << YAML::Key << "type" << YAML::Value << to_string(p.type);
    out << YAML::Key << "first_input" << YAML::Value << static_cast<long long>(p.begin);
    out << YAML::Key << "inputs" << YAML::Value << static_cast<long long>(p.dim);
    out << YAML::Key << "log_variance" << YAML::Value << p.log_variance;
    out << YAML::Key << "log_lengthscale" << YAML::Value;
    emit_vector(out, p.log_lengthscale);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

struct Reader {
  const std::string& path;

  [[noreturn]] void broken(const std::string& what) const {
    throw DataError("model file '" + path + "' is broken: " + what);
  }
  YAML::Node at(const YAML::Node& n, const std::string& key, const std::string& where) const {
    if (!n.IsMap() || !n[key]) broken("missing '" + where + key + "'");
    return n[key];
  }
  template <class T>
  T get(const YAML::Node& n, const std::string& key, const std::string& where) const {
    try {
      return at(n, key, where).as<T>();
    } catch (const YAML::Exception&) {
      broken("'" + where + key + "' has the wrong type");
    }
  }
  Vector vec(const YAML::Node& n, const std::string& key, const std::string& where, Index expect = -1) const {
    return numbers(at(n, key, where), where + key, expect);
  }
  // The sequence s of numbers, named `name` in messages.
  Vector numbers(const YAML::Node& s, const std::string& name, Index expect = -1) const {
    if (!s.IsSequence()) broken("'" + name + "' must be a list of numbers");
    Vector v(static_cast<Index>(s.size()));
    try {
      Index i = 0;
      for (const auto& e : s) v[i++] = e.as<double>();
    } catch (const YAML::Exception&) {
      broken("'" + name + "' holds a value that is not a number");
    }
    if (expect >= 0 && v.size() != expect)
      broken("'" + name + "' has " + std::to_string(v.size()) + " values, expected " + std::to_string(expect));
    return v;
  }
  std::vector<std::string> strings(const YAML::Node& n, const std::string& key, const std::string& where) const {
    const YAML::Node s = at(n, key, where);
    if (!s.IsSequence()) broken("'" + where + key + "' must be a list");
    std::vector<std::string> out;
    for (const auto& e : s) out.push_back(e.as<std::string>());
    return out;
  }
};

// A kernel written by emit_kernel, at `name` in messages.
Kernel read_kernel(const Reader& r, const YAML::Node& kn, const std::string& name) {
  if (!kn.IsSequence() || kn.size() == 0) r.broken("'" + name + "' must be a non-empty list");
  std::vector<KernelPart> parts;
  std::vector<KernelTerm> terms;
  for (size_t i = 0; i < kn.size(); ++i) {
    const std::string w = name + "[" + std::to_string(i) + "].";
    // Without term and factor, each part is a term of its own.
    const long long term = kn[i]["term"] ? r.get<long long>(kn[i], "term", w) : static_cast<long long>(i);
    const long long factor = kn[i]["factor"] ? r.get<long long>(kn[i], "factor", w) : 0;
    if (term < 0 || factor < 0 || term > static_cast<long long>(kn.size()) ||
        factor > static_cast<long long>(kn.size()))
      r.broken("'" + w + "term' or '" + w + "factor' is out of range");
    if (terms.size() <= static_cast<size_t>(term)) terms.resize(static_cast<size_t>(term) + 1);
    auto& t = terms[static_cast<size_t>(term)];
    if (t.size() <= static_cast<size_t>(factor)) t.resize(static_cast<size_t>(factor) + 1);
    t[static_cast<size_t>(factor)].push_back(static_cast<Index>(i));
    KernelPart p;
    p.fixed_variance = kn[i]["fixed_variance"] && r.get<bool>(kn[i], "fixed_variance", w);
    try {
      p.type = parse_kernel_type(r.get<std::string>(kn[i], "type", w));
    } catch (const ConfigError& e) {
      r.broken(e.what());
    }
    p.begin = r.get<long long>(kn[i], "first_input", w);
    p.dim = r.get<long long>(kn[i], "inputs", w);
    p.log_variance = r.get<double>(kn[i], "log_variance", w);
    p.log_lengthscale = r.vec(kn[i], "log_lengthscale", w, p.type == KernelType::ard ? p.dim : 1);
    parts.push_back(p);
  }
  try {
    return Kernel(parts, terms);
  } catch (const ConfigError& e) {
    r.broken(e.what());
  }
}

// A shared unit effect's loading on the field's draws (UnitEffectMoments) has one entry per entry of
// q and direction of the point spread: known once both are read.
void check_unit_loadings(const Reader& r, const Model& m) {
  const Index rank = m.loading_size();
  for (Index s = 0; s < m.spec.num_sources(); ++s)
    for (const auto& [unit, u] : m.unit_effect_of(s).posterior)
      if (u.loading.size() > 0 && u.loading.size() != rank)
        r.broken("'" + std::string(s == 0 ? "model." : "model.more_sources[" + std::to_string(s - 1) + "].") +
                 "unit_effect.posterior." + unit + "' has a loading of " + std::to_string(u.loading.size()) +
                 " entries, expected " + std::to_string(rank) +
                 " (one per entry of q and direction of the point spread)");
}

// model.point_spread: directions as rows, each the field's F entries and q's mean's entries.
void read_point_spread(const Reader& r, const YAML::Node& ps, Model& m) {
  const Index F = spread_field_size(m);
  const YAML::Node field = r.at(ps, "field", "model.point_spread."), qm = r.at(ps, "q_mean", "model.point_spread.");
  if (!field.IsSequence() || !qm.IsSequence() || field.size() != qm.size())
    r.broken("'model.point_spread.field' and '.q_mean' must be lists of one row per direction");
  const Index K = static_cast<Index>(field.size());
  m.spread.field.resize(F, K);
  m.spread.q_mean.resize(m.num_q(), K);
  for (Index k = 0; k < K; ++k) {
    const std::string at = "[" + std::to_string(k) + "]";
    m.spread.field.col(k) = r.numbers(field[static_cast<size_t>(k)], "model.point_spread.field" + at, F);
    m.spread.q_mean.col(k) = r.numbers(qm[static_cast<size_t>(k)], "model.point_spread.q_mean" + at, m.num_q());
  }
  // The sds are for reading: predictions need only the directions.
  if (const YAML::Node sd = ps["sd"]; sd && sd.IsMap()) {
    std::vector<double> values;
    for (const auto& kv : sd) {
      if (!kv.first.IsScalar()) r.broken("'model.point_spread.sd' must map parameter names to numbers");
      m.spread.names.push_back(kv.first.as<std::string>());
      values.push_back(r.get<double>(sd, m.spread.names.back(), "model.point_spread.sd."));
    }
    m.spread.sd = Eigen::Map<const Vector>(values.data(), static_cast<Index>(values.size()));
  }
}

// The index of the task named `task` among spec.tasks.
Index task_of(const Reader& r, const ModelSpec& spec, const std::string& task, const std::string& name) {
  if (const Index d = spec.find_task(task); d >= 0) return d;
  r.broken("'" + name + "' names the task '" + task + "', which 'model.tasks' does not list");
}

// The sections every kind has: inputs, grid, units, training, config. D: the model's input
// count to check against (-1: no GP).
void read_common(const Reader& r, const YAML::Node& root, ModelFile& f, Index D) {
  const YAML::Node inputs = r.at(root, "inputs", "");
  f.covariates = r.strings(inputs, "covariates", "inputs.");
  const YAML::Node st = r.at(inputs, "standardization", "inputs.");
  f.standardization.mean = r.vec(st, "mean", "inputs.standardization.", static_cast<Index>(f.covariates.size()));
  f.standardization.sd = r.vec(st, "sd", "inputs.standardization.", static_cast<Index>(f.covariates.size()));
  f.coordinates = r.get<int>(inputs, "coordinates", "inputs.");
  if (inputs["periods"]) {
    std::vector<Period> periods;
    try {
      for (const auto& label : r.strings(inputs, "periods", "inputs."))
        periods.push_back(parse_period(label, "inputs.periods"));
      f.time = TimeAxis(periods, "inputs.periods");
    } catch (const ConfigError& e) {
      r.broken(e.what());
    }
  }
  const Index time_inputs = f.time.empty() ? 0 : kTimeInputs;
  if (D >= 0 && static_cast<Index>(f.covariates.size()) + f.coordinates + time_inputs != D)
    r.broken(std::to_string(f.covariates.size()) + " covariates, " + std::to_string(f.coordinates) +
             " coordinates and " + std::to_string(time_inputs) + " time inputs do not match the " + std::to_string(D) +
             " inputs of the inducing points");

  const YAML::Node g = r.at(root, "grid", "");
  f.grid.width = r.get<int>(g, "width", "grid.");
  f.grid.height = r.get<int>(g, "height", "grid.");
  const Vector t = r.vec(g, "transform", "grid.", 6);
  for (int k = 0; k < 6; ++k) f.grid.transform[static_cast<size_t>(k)] = t[k];
  f.grid.crs_wkt = r.get<std::string>(g, "crs", "grid.");

  const YAML::Node u = r.at(root, "units", "");
  f.train_units = r.strings(u, "train", "units.");
  f.holdout_units = r.strings(u, "holdout", "units.");
  const YAML::Node tr = r.at(root, "training", "");
  f.training.epochs = r.get<int>(tr, "epochs", "training.");
  f.training.stop_reason = r.get<std::string>(tr, "stop_reason", "training.");
  f.training.elbo = r.get<double>(tr, "elbo", "training.");
  f.training.best_holdout_nll = r.get<double>(tr, "best_holdout_nll", "training.");
  f.training.seconds = r.get<double>(tr, "seconds", "training.");
  f.config = r.at(root, "config", "");
}

}  // namespace

void write_model_file(const std::string& path, const ModelFile& f) {
  const Model& m = f.model;
  YAML::Emitter out;
  out.SetDoublePrecision(17);
  out << YAML::BeginMap;
  out << YAML::Key << "format" << YAML::Value << "vbagg-model";
  out << YAML::Key << "version" << YAML::Value << kModelFormatVersion;
  out << YAML::Key << "written_by" << YAML::Value << std::string("vbagg ") + VBAGG_VERSION;

  out << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "kind" << YAML::Value << to_string(f.kind);
  if (f.kind == ModelKind::constant) {
    out << YAML::Key << "overall_rate" << YAML::Value << f.constant.overall;
    out << YAML::Key << "unit_rates" << YAML::Value << YAML::BeginMap;
    for (const auto& [id, rate] : f.constant.unit) out << YAML::Key << id << YAML::Value << rate;
    out << YAML::EndMap << YAML::EndMap;
  } else {
    out << YAML::Key << "likelihood" << YAML::Value << to_string(m.spec.likelihood);
    out << YAML::Key << "link" << YAML::Value << to_string(m.spec.link);
    out << YAML::Key << "covariance" << YAML::Value << to_string(m.spec.covariance);
    out << YAML::Key << "aggregation" << YAML::Value << to_string(m.spec.aggregation);
    out << YAML::Key << "expectation" << YAML::Value << to_string(m.spec.expectation);
    if (!m.spec.source_name.empty()) out << YAML::Key << "source" << YAML::Value << m.spec.source_name;
    out << YAML::Key << "learn_inducing" << YAML::Value << m.spec.learn_inducing;
    if (m.spec.map_estimate) out << YAML::Key << "prior_precision" << YAML::Value << m.spec.prior_precision;
    // The prior the fit put on every unit effect's sigma_u (model.unit_effect_prior_sd), so the file
    // says which objective its parameters maximise.
    if (m.spec.unit_effect_prior_rate > 0 && m.spec.any_unit_effect())
      out << YAML::Key << "unit_effect_prior_rate" << YAML::Value << m.spec.unit_effect_prior_rate;
    // Likewise the kernel prior (model.kernel.space_prior) with the centres the data gave.
    if (m.spec.kernel_prior.part >= 0) {
      const ModelSpec::KernelPrior& p = m.spec.kernel_prior;
      out << YAML::Key << "kernel_prior" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "part"
          << YAML::Value << p.part << YAML::Key << "log_variance" << YAML::Value << p.log_variance << YAML::Key
          << "log_lengthscale" << YAML::Value << p.log_lengthscale << YAML::Key << "sd" << YAML::Value << p.sd
          << YAML::EndMap;
    }
    out << YAML::Key << "kernel" << YAML::Value;
    emit_kernel(out, m.kernel);
    out << YAML::Key << "mean" << YAML::Value << m.mean;
    if (!m.spec.tasks.empty()) {
      out << YAML::Key << "tasks" << YAML::Value << YAML::Flow << m.spec.tasks;
      out << YAML::Key << "task" << YAML::Value << m.spec.task_name(m.spec.task);
    }
    if (m.spec.mixed()) {
      // Shared latent fields: the further latents' kernels, each latent's number of inducing inputs
      // (their columns follow one another in 'inducing'), the mixing weights (a row per task) and
      // the further tasks' intercepts.
      out << YAML::Key << "more_kernels" << YAML::Value << YAML::BeginSeq;
      for (const Kernel& k : m.more_kernels) emit_kernel(out, k);
      out << YAML::EndSeq;
      std::vector<long long> sizes;
      for (Index q = 0; q < m.num_latents(); ++q) sizes.push_back(static_cast<long long>(m.latent_size(q)));
      out << YAML::Key << "latent_inducing" << YAML::Value << YAML::Flow << sizes;
      out << YAML::Key << "mixing" << YAML::Value << YAML::BeginSeq;
      for (Index d = 0; d < m.mixing.rows(); ++d) emit_vector(out, m.mixing.row(d).transpose());
      out << YAML::EndSeq;
      out << YAML::Key << "task_means" << YAML::Value;
      emit_vector(out, m.task_means);
    }
    if (m.spec.fixed_effects == FixedEffects::variational) {
      // The intercept's offset and beta are q's last entries, whitened by linear_prior_sd.
      out << YAML::Key << "fixed_effects" << YAML::Value << to_string(m.spec.fixed_effects);
      out << YAML::Key << "linear_inputs" << YAML::Value << static_cast<long long>(m.spec.linear_inputs);
      out << YAML::Key << "linear_prior_sd" << YAML::Value << m.spec.linear_prior_sd;
    } else if (m.spec.linear_inputs > 0) {
      out << YAML::Key << "linear_mean" << YAML::Value;
      emit_vector(out, m.linear_mean);
      out << YAML::Key << "linear_prior_sd" << YAML::Value << m.spec.linear_prior_sd;
    }
    emit_source_parameters(out, m);
    if (m.spec.num_sources() > 1) {
      // The further sources of a joint fit, each with its own observation model and parameters.
      out << YAML::Key << "more_sources" << YAML::Value << YAML::BeginSeq;
      for (Index s = 1; s < m.spec.num_sources(); ++s) {
        const Model v = m.for_source(s);
        out << YAML::BeginMap;
        out << YAML::Key << "source" << YAML::Value << v.spec.source_name;
        out << YAML::Key << "likelihood" << YAML::Value << to_string(v.spec.likelihood);
        out << YAML::Key << "link" << YAML::Value << to_string(v.spec.link);
        if (!v.spec.tasks.empty()) out << YAML::Key << "task" << YAML::Value << v.spec.task_name(v.spec.task);
        out << YAML::Key << "aggregation" << YAML::Value << to_string(v.spec.aggregation);
        out << YAML::Key << "expectation" << YAML::Value << to_string(v.spec.expectation);
        emit_source_parameters(out, v);
        out << YAML::EndMap;
      }
      out << YAML::EndSeq;
    }
    out << YAML::Key << "jitter" << YAML::Value << m.jitter;
    out << YAML::Key << "inducing" << YAML::Value << YAML::BeginSeq;
    for (Index j = 0; j < m.num_inducing(); ++j) emit_vector(out, m.inducing.col(j));
    out << YAML::EndSeq;
    out << YAML::Key << "q_mean" << YAML::Value;
    emit_vector(out, m.q_mean);
    if (!m.spec.map_estimate) {
      out << YAML::Key << "q_chol" << YAML::Value << YAML::BeginSeq;
      for (Index i = 0; i < m.num_q(); ++i) emit_vector(out, m.q_chol.row(i).head(i + 1).transpose());
      out << YAML::EndSeq;
    }
    if (m.spread.directions() > 0) {
      const PointSpread& sp = m.spread;
      out << YAML::Key << "point_spread" << YAML::Value << YAML::BeginMap;
      out << YAML::Key << "sd" << YAML::Value << YAML::BeginMap;
      for (size_t j = 0; j < sp.names.size(); ++j)
        out << YAML::Key << sp.names[j] << YAML::Value << sp.sd[static_cast<Index>(j)];
      out << YAML::EndMap;
      out << YAML::Key << "field" << YAML::Value << YAML::BeginSeq;
      for (Index k = 0; k < sp.directions(); ++k) emit_vector(out, sp.field.col(k));
      out << YAML::EndSeq;
      out << YAML::Key << "q_mean" << YAML::Value << YAML::BeginSeq;
      for (Index k = 0; k < sp.directions(); ++k) emit_vector(out, sp.q_mean.col(k));
      out << YAML::EndSeq;
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }

  out << YAML::Key << "inputs" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "covariates" << YAML::Value;
  emit_strings(out, f.covariates);
  out << YAML::Key << "standardization" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "mean" << YAML::Value;
  emit_vector(out, f.standardization.mean);
  out << YAML::Key << "sd" << YAML::Value;
  emit_vector(out, f.standardization.sd);
  out << YAML::EndMap;
  out << YAML::Key << "coordinates" << YAML::Value << f.coordinates;
  if (!f.time.empty()) {
    out << YAML::Key << "periods" << YAML::Value;
    emit_strings(out, f.time.labels());
  }
  out << YAML::EndMap;

  out << YAML::Key << "grid" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "width" << YAML::Value << f.grid.width;
  out << YAML::Key << "height" << YAML::Value << f.grid.height;
  out << YAML::Key << "transform" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (double t : f.grid.transform) out << t;
  out << YAML::EndSeq;
  out << YAML::Key << "crs" << YAML::Value << f.grid.crs_wkt;
  out << YAML::EndMap;

  out << YAML::Key << "units" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "train" << YAML::Value;
  emit_strings(out, f.train_units);
  out << YAML::Key << "holdout" << YAML::Value;
  emit_strings(out, f.holdout_units);
  out << YAML::EndMap;

  out << YAML::Key << "training" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "epochs" << YAML::Value << f.training.epochs;
  out << YAML::Key << "stop_reason" << YAML::Value << f.training.stop_reason;
  out << YAML::Key << "elbo" << YAML::Value << f.training.elbo;
  out << YAML::Key << "best_holdout_nll" << YAML::Value << f.training.best_holdout_nll;
  out << YAML::Key << "seconds" << YAML::Value << f.training.seconds;
  out << YAML::EndMap;

  out << YAML::Key << "config" << YAML::Value << (f.config ? f.config : YAML::Node(YAML::NodeType::Map));
  out << YAML::EndMap;
  if (!out.good()) throw DataError("cannot encode the model for '" + path + "': " + out.GetLastError());
  write_text_atomic(path, std::string(out.c_str()) + "\n");
}

ModelFile read_model_file(const std::string& path) {
  if (!std::filesystem::exists(path)) throw DataError("model file '" + path + "' does not exist");
  std::ifstream in(path);
  if (!in) throw DataError("cannot read model file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return parse_model_file(text.str(), path);
}

namespace {
ModelFile parse_model(const std::string& text, const std::string& path);
}

ModelFile parse_model_file(const std::string& text, const std::string& path) {
  // Anything yaml-cpp itself rejects (a value of the wrong type anywhere) is a broken file too.
  try {
    return parse_model(text, path);
  } catch (const YAML::Exception& e) {
    throw DataError("model file '" + path + "' is broken at line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

namespace {

ModelFile parse_model(const std::string& text, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw DataError("model file '" + path + "' is broken: not valid YAML (" + e.msg + ")");
  }
  Reader r{path};
  if (!root.IsMap() || !root["format"] || root["format"].as<std::string>("") != "vbagg-model")
    throw DataError("'" + path + "' is not a vbagg model file (no 'format: vbagg-model')");
  const int version = r.get<int>(root, "version", "");
  if (version > kModelFormatVersion)
    throw DataError("model file '" + path + "' has format version " + std::to_string(version) +
                    "; this vbagg reads up to " + std::to_string(kModelFormatVersion) + " (upgrade vbagg)");
  if (version < 1) r.broken("format version " + std::to_string(version) + " is not valid");

  ModelFile f;
  const YAML::Node mn = r.at(root, "model", "");
  try {
    if (mn["kind"]) f.kind = parse_model_kind(r.get<std::string>(mn, "kind", "model."));
  } catch (const ConfigError& e) {
    r.broken(e.what());
  }
  if (f.kind == ModelKind::constant) {
    f.constant.overall = r.get<double>(mn, "overall_rate", "model.");
    const YAML::Node rates = r.at(mn, "unit_rates", "model.");
    if (!rates.IsMap()) r.broken("'model.unit_rates' must map unit ids to rates");
    for (const auto& kv : rates) f.constant.unit[kv.first.as<std::string>()] = kv.second.as<double>();
    read_common(r, root, f, -1);
    return f;
  }
  Model& m = f.model;
  m.spec.map_estimate = f.kind == ModelKind::nystrom;
  if (m.spec.map_estimate) m.spec.prior_precision = r.get<double>(mn, "prior_precision", "model.");
  if (mn["unit_effect_prior_rate"]) {
    m.spec.unit_effect_prior_rate = r.get<double>(mn, "unit_effect_prior_rate", "model.");
    if (!(m.spec.unit_effect_prior_rate > 0) || !std::isfinite(m.spec.unit_effect_prior_rate))
      r.broken("'model.unit_effect_prior_rate' must be a positive number");
  }
  if (const YAML::Node kp = mn["kernel_prior"]) {
    ModelSpec::KernelPrior& p = m.spec.kernel_prior;
    p.part = r.get<Index>(kp, "part", "model.kernel_prior.");
    p.log_variance = r.get<double>(kp, "log_variance", "model.kernel_prior.");
    p.log_lengthscale = r.get<double>(kp, "log_lengthscale", "model.kernel_prior.");
    p.sd = r.get<double>(kp, "sd", "model.kernel_prior.");
    if (p.part < 0 || !(p.sd > 0) || !std::isfinite(p.sd) || !std::isfinite(p.log_variance) ||
        !std::isfinite(p.log_lengthscale))
      r.broken("'model.kernel_prior' needs a part of at least 0, a positive sd and finite centres");
  }
  try {
    m.spec.likelihood = parse_likelihood(r.get<std::string>(mn, "likelihood", "model."));
    m.spec.link = parse_link(r.get<std::string>(mn, "link", "model."));
    m.spec.covariance = parse_covariance_mode(r.get<std::string>(mn, "covariance", "model."));
    m.spec.aggregation = parse_aggregation(r.get<std::string>(mn, "aggregation", "model."));
    // Files written before the delta method existed used the bound.
    if (mn["expectation"]) m.spec.expectation = parse_expectation(r.get<std::string>(mn, "expectation", "model."));
    if (mn["source"]) m.spec.source_name = r.get<std::string>(mn, "source", "model.");
    if (mn["more_kernels"]) m.spec.latents = 1 + static_cast<Index>(mn["more_kernels"].size());
    if (mn["tasks"]) m.spec.tasks = r.strings(mn, "tasks", "model.");
    if (mn["task"]) m.spec.task = task_of(r, m.spec, r.get<std::string>(mn, "task", "model."), "model.task");
    if (mn["more_sources"]) {
      const YAML::Node ms = mn["more_sources"];
      if (!ms.IsSequence()) r.broken("'model.more_sources' must be a list");
      for (size_t i = 0; i < ms.size(); ++i) {
        const std::string w = "model.more_sources[" + std::to_string(i) + "].";
        SourceSpec src;
        src.name = r.get<std::string>(ms[i], "source", w);
        src.likelihood = parse_likelihood(r.get<std::string>(ms[i], "likelihood", w));
        // Files written before sources had links of their own shared the first source's.
        src.link = ms[i]["link"] ? parse_link(r.get<std::string>(ms[i], "link", w)) : m.spec.link;
        if (ms[i]["task"]) src.task = task_of(r, m.spec, r.get<std::string>(ms[i], "task", w), w + "task");
        src.aggregation = parse_aggregation(r.get<std::string>(ms[i], "aggregation", w));
        src.expectation = parse_expectation(r.get<std::string>(ms[i], "expectation", w));
        src.unit_effect = static_cast<bool>(ms[i]["unit_effect"]);
        m.spec.more_sources.push_back(src);
      }
    }
    m.spec.unit_effect = static_cast<bool>(mn["unit_effect"]);
    m.spec.validate();
  } catch (const ConfigError& e) {
    r.broken(e.what());
  }
  m.spec.learn_inducing = r.get<bool>(mn, "learn_inducing", "model.");
  m.kernel = read_kernel(r, r.at(mn, "kernel", "model."), "model.kernel");
  if (m.spec.kernel_prior.part >= static_cast<Index>(m.kernel.parts().size()))
    r.broken("'model.kernel_prior.part' is not a part of 'model.kernel'");
  m.mean = r.get<double>(mn, "mean", "model.");
  if (m.spec.mixed()) {
    for (Index q = 1; q < m.spec.latents; ++q)
      m.more_kernels.push_back(read_kernel(r, mn["more_kernels"][static_cast<size_t>(q - 1)],
                                           "model.more_kernels[" + std::to_string(q - 1) + "]"));
    const Vector sizes = r.vec(mn, "latent_inducing", "model.", m.spec.latents);
    for (Index q = 0; q < sizes.size(); ++q) {
      if (!(sizes[q] >= 1) || sizes[q] != std::floor(sizes[q]))
        r.broken("'model.latent_inducing' must hold a positive count per latent");
      m.inducing_sizes.push_back(static_cast<Index>(sizes[q]));
    }
    const YAML::Node mx = r.at(mn, "mixing", "model.");
    if (!mx.IsSequence() || static_cast<Index>(mx.size()) != m.spec.num_tasks())
      r.broken("'model.mixing' must have one row per task");
    m.mixing.resize(m.spec.num_tasks(), m.spec.latents);
    for (Index d = 0; d < m.spec.num_tasks(); ++d)
      m.mixing.row(d) =
          r.numbers(mx[static_cast<size_t>(d)], "model.mixing[" + std::to_string(d) + "]", m.spec.latents).transpose();
    m.task_means = r.vec(mn, "task_means", "model.", m.spec.num_tasks() - 1);
  }
  // Point fixed effects, and a constant mean, when absent (files of models without them).
  if (mn["fixed_effects"]) {
    try {
      m.spec.fixed_effects = parse_fixed_effects(r.get<std::string>(mn, "fixed_effects", "model."));
    } catch (const ConfigError& e) {
      r.broken(e.what());
    }
  }
  if (m.spec.fixed_effects == FixedEffects::variational) {
    if (mn["linear_mean"]) r.broken("'model.linear_mean' is a point estimate: variational fixed effects live in q");
    const long long d = r.get<long long>(mn, "linear_inputs", "model.");
    if (d < 0) r.broken("'model.linear_inputs' cannot be negative");
    m.spec.linear_inputs = d;
    m.spec.linear_prior_sd = r.get<double>(mn, "linear_prior_sd", "model.");
    if (!(m.spec.linear_prior_sd > 0)) r.broken("'model.linear_prior_sd' must be positive");
  } else if (mn["linear_mean"]) {
    // Every task's coefficients, task after task.
    m.linear_mean = r.vec(mn, "linear_mean", "model.", -1);
    if (m.linear_mean.size() % m.spec.num_tasks() != 0)
      r.broken("'model.linear_mean' has " + std::to_string(m.linear_mean.size()) + " coefficients for " +
               std::to_string(m.spec.num_tasks()) + " tasks");
    m.spec.linear_inputs = m.linear_mean.size() / m.spec.num_tasks();
    m.spec.linear_prior_sd = r.get<double>(mn, "linear_prior_sd", "model.");
    if (!(m.spec.linear_prior_sd > 0)) r.broken("'model.linear_prior_sd' must be positive");
  }
  m.more_sources.resize(m.spec.more_sources.size());
  for (Index s = 0; s < m.spec.num_sources(); ++s) {
    const YAML::Node node = s == 0 ? mn : mn["more_sources"][static_cast<size_t>(s - 1)];
    const std::string w = s == 0 ? "model." : "model.more_sources[" + std::to_string(s - 1) + "].";
    const std::vector<std::string> lik_names = likelihood_of(m.spec.source(s).likelihood).param_names();
    Vector& params = m.likelihood_params_of(s);
    params.resize(static_cast<Index>(lik_names.size()));
    for (size_t k = 0; k < lik_names.size(); ++k) params[static_cast<Index>(k)] = r.get<double>(node, lik_names[k], w);
    if (m.spec.source(s).unit_effect) {
      const YAML::Node ue = node["unit_effect"];
      m.unit_effect_of(s).log_sd = std::max(r.get<double>(ue, "log_sd", w + "unit_effect."), kUnitLogSdFloor);
      m.unit_effect_of(s).units = r.strings(ue, "units", w + "unit_effect.");
      if (s == 0) m.spec.unit_effect_shared = ue["shared"] && r.get<bool>(ue, "shared", w + "unit_effect.");
      if (ue["posterior"]) {
        if (!ue["posterior"].IsMap())
          r.broken(
              "'" + w +
              "unit_effect.posterior' must map unit ids to [mean, variance] or [mean, variance, shift, loading...]");
        for (const auto& entry : ue["posterior"]) {
          const std::string unit = entry.first.as<std::string>();
          const Vector u = r.vec(ue["posterior"], unit, w + "unit_effect.posterior.");
          if (u.size() < 2 || u.size() == 3)
            r.broken("'" + w + "unit_effect.posterior." + unit +
                     "' must be [mean, variance] or [mean, variance, shift, loading...]");
          if (!(u[1] > 0))
            r.broken("'" + w + "unit_effect.posterior." + unit + "' has a variance that is not positive");
          UnitEffectMoments& e = m.unit_effect_of(s).posterior[unit];
          e = {u[0], u[1]};
          if (u.size() > 3) {
            e.shift = u[2];
            e.loading = u.tail(u.size() - 3);
          }
        }
      }
    }
  }
  m.jitter = r.get<double>(mn, "jitter", "model.");
  const YAML::Node in = r.at(mn, "inducing", "model.");
  if (!in.IsSequence() || in.size() == 0) r.broken("'model.inducing' must be a non-empty list");
  const Index M = static_cast<Index>(in.size());
  Index D = -1;
  Index j = 0;
  for (const auto& column : in) {
    const Vector w = r.numbers(column, "model.inducing[" + std::to_string(j) + "]", D);
    if (D < 0) {
      D = w.size();
      m.inducing.resize(D, M);
    }
    m.inducing.col(j++) = w;
  }
  for (Index q = 0; q < m.num_latents(); ++q)
    for (const auto& p : m.kernel_of(q).parts())
      if (p.begin + p.dim > D)
        r.broken("a kernel part reads inputs beyond the " + std::to_string(D) + " of the inducing points");
  if (m.spec.mixed() && m.latent_begin(m.num_latents()) != M)
    r.broken("'model.latent_inducing' adds up to " + std::to_string(m.latent_begin(m.num_latents())) + " but " +
             std::to_string(M) + " inducing inputs are listed");
  // q: the inducing values, then the variational fixed effects.
  const Index Mq = M + m.spec.num_fixed_effects();
  m.q_mean = r.vec(mn, "q_mean", "model.", Mq);
  if (m.spec.linear_inputs > D)
    r.broken("'model.linear_mean' has " + std::to_string(m.spec.linear_inputs) + " coefficients for " +
             std::to_string(D) + " inputs");
  m.q_chol = Matrix::Zero(Mq, Mq);
  if (!m.spec.map_estimate) {
    const YAML::Node qc = r.at(mn, "q_chol", "model.");
    if (!qc.IsSequence() || static_cast<Index>(qc.size()) != Mq)
      r.broken("'model.q_chol' must have one row per entry of 'model.q_mean'");
    // Rows are read in place (as the inducing inputs above): wrapping each in a new node would
    // merge the whole document's node set into it, quadratic in M.
    Index i = 0;
    for (const auto& row : qc) {
      m.q_chol.row(i).head(i + 1) = r.numbers(row, "model.q_chol[" + std::to_string(i) + "]", i + 1).transpose();
      if (!(m.q_chol(i, i) > 0))
        r.broken("'model.q_chol' has a non-positive diagonal entry in row " + std::to_string(i));
      ++i;
    }
  }
  if (const YAML::Node ps = mn["point_spread"]) read_point_spread(r, ps, m);
  check_unit_loadings(r, m);
  read_common(r, root, f, D);
  return f;
}

}  // namespace

}  // namespace vbagg::io
