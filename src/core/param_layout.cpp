#include "param_layout.hpp"

#include <algorithm>
#include <cmath>

#include "likelihood.hpp"

namespace vbagg {

namespace {

Index tri(const Model& m) { return m.spec.map_estimate ? 0 : m.num_q() * (m.num_q() + 1) / 2; }

std::string idx(Index i) { return "[" + std::to_string(i) + "]"; }
std::string idx(Index i, Index j) { return "[" + std::to_string(i) + "," + std::to_string(j) + "]"; }

const ParamBlock kQMean{
    ParamBlockId::q_mean,
    [](const Model& m) { return m.num_q(); },
    [](const Model& m, double* out) { Eigen::Map<Vector>(out, m.num_q()) = m.q_mean; },
    [](Model& m, const double* in) { m.q_mean = Eigen::Map<const Vector>(in, m.num_q()); },
    [](const Model& m, std::vector<std::string>& out) {
      for (Index i = 0; i < m.num_q(); ++i) out.push_back("q_mean" + idx(i));
    },
    [](const Model& m, const ModelGradient& g, double* out) { Eigen::Map<Vector>(out, m.num_q()) = g.q_mean; },
};

// L_v column by column, the diagonal as its log so it stays positive.
const ParamBlock kQChol{
    ParamBlockId::q_chol,
    tri,
    [](const Model& m, double* out) {
      for (Index j = 0; j < m.num_q() && !m.spec.map_estimate; ++j) {
        *out++ = std::log(m.q_chol(j, j));
        for (Index i = j + 1; i < m.num_q(); ++i) *out++ = m.q_chol(i, j);
      }
    },
    [](Model& m, const double* in) {
      const Index M = m.num_q();
      m.q_chol.setZero(M, M);
      for (Index j = 0; j < M && !m.spec.map_estimate; ++j) {
        m.q_chol(j, j) = std::exp(*in++);
        for (Index i = j + 1; i < M; ++i) m.q_chol(i, j) = *in++;
      }
    },
    [](const Model& m, std::vector<std::string>& out) {
      for (Index j = 0; j < m.num_q() && !m.spec.map_estimate; ++j) {
        out.push_back("log q_chol" + idx(j, j));
        for (Index i = j + 1; i < m.num_q(); ++i) out.push_back("q_chol" + idx(i, j));
      }
    },
    [](const Model& m, const ModelGradient& g, double* out) {
      for (Index j = 0; j < m.num_q() && !m.spec.map_estimate; ++j) {
        *out++ = g.q_chol(j, j) * m.q_chol(j, j);  // d/d log L_jj
        for (Index i = j + 1; i < m.num_q(); ++i) *out++ = g.q_chol(i, j);
      }
    },
};

const ParamBlock kMean{
    ParamBlockId::mean,
    [](const Model&) { return Index{1}; },
    [](const Model& m, double* out) { *out = m.mean; },
    [](Model& m, const double* in) { m.mean = *in; },
    [](const Model&, std::vector<std::string>& out) { out.push_back("mean"); },
    [](const Model&, const ModelGradient& g, double* out) { *out = g.mean; },
};

// Every task's point coefficients beta_d, task after task.
const ParamBlock kLinearMean{
    ParamBlockId::linear_mean,
    [](const Model& m) { return m.spec.num_linear_coefficients(); },
    [](const Model& m, double* out) {
      const Index n = m.spec.num_linear_coefficients();
      if (m.linear_mean.size() != n)
        throw ConfigError("the model holds " + std::to_string(m.linear_mean.size()) + " linear-mean coefficients for " +
                          std::to_string(m.spec.num_linear_point()) + " inputs and " +
                          std::to_string(m.spec.num_tasks()) + " tasks");
      Eigen::Map<Vector>(out, n) = m.linear_mean;
    },
    [](Model& m, const double* in) { m.linear_mean = Eigen::Map<const Vector>(in, m.spec.num_linear_coefficients()); },
    [](const Model& m, std::vector<std::string>& out) {
      for (Index d = 0; d < m.spec.num_tasks(); ++d)
        for (Index i = 0; i < m.spec.num_linear_point(); ++i)
          out.push_back((d == 0 ? std::string() : m.spec.task_name(d) + ".") + "linear_mean" + idx(i));
    },
    [](const Model& m, const ModelGradient& g, double* out) {
      Eigen::Map<Vector>(out, m.spec.num_linear_coefficients()) = g.linear_mean;
    },
};

// Every latent's kernel log-hyperparameters, latent after latent.
const ParamBlock kKernel{
    ParamBlockId::kernel,
    [](const Model& m) { return m.num_kernel_params(); },
    [](const Model& m, double* out) {
      for (Index q = 0; q < m.num_latents(); ++q) {
        const Kernel& k = m.kernel_of(q);
        Eigen::Map<Vector>(out, k.num_params()) = k.params();
        out += k.num_params();
      }
    },
    [](Model& m, const double* in) {
      for (Index q = 0; q < m.num_latents(); ++q) {
        Kernel& k = m.kernel_of(q);
        k.set_params(Eigen::Map<const Vector>(in, k.num_params()));
        in += k.num_params();
      }
    },
    [](const Model& m, std::vector<std::string>& out) {
      for (Index q = 0; q < m.num_latents(); ++q)
        for (const auto& n : m.kernel_of(q).param_names())
          out.push_back((q == 0 ? std::string() : "latent" + std::to_string(q) + ".") + "kernel." + n);
    },
    [](const Model& m, const ModelGradient& g, double* out) {
      Eigen::Map<Vector>(out, m.num_kernel_params()) = g.kernel;
    },
};

// The intercepts mu_d of tasks 1.. (task 0's is `mean`).
const ParamBlock kTaskMeans{
    ParamBlockId::task_means,
    [](const Model& m) { return m.spec.num_tasks() - 1; },
    [](const Model& m, double* out) {
      if (m.task_means.size() != m.spec.num_tasks() - 1)
        throw ConfigError("the model holds " + std::to_string(m.task_means.size() + 1) + " task means for " +
                          std::to_string(m.spec.num_tasks()) + " tasks");
      Eigen::Map<Vector>(out, m.task_means.size()) = m.task_means;
    },
    [](Model& m, const double* in) { m.task_means = Eigen::Map<const Vector>(in, m.spec.num_tasks() - 1); },
    [](const Model& m, std::vector<std::string>& out) {
      for (Index d = 1; d < m.spec.num_tasks(); ++d) out.push_back(m.spec.task_name(d) + ".mean");
    },
    [](const Model& m, const ModelGradient& g, double* out) {
      Eigen::Map<Vector>(out, m.spec.num_tasks() - 1) = g.task_means;
    },
};

Index mixing_size(const Model& m) { return m.spec.mixed() ? m.spec.num_tasks() * m.spec.latents : 0; }

// The mixing weights w_dq, task by task (row-major), when the model mixes latents into tasks.
const ParamBlock kMixing{
    ParamBlockId::mixing,
    mixing_size,
    [](const Model& m, double* out) {
      if (!m.spec.mixed()) return;
      if (m.mixing.rows() != m.spec.num_tasks() || m.mixing.cols() != m.spec.latents)
        throw ConfigError("the mixing weights are " + std::to_string(m.mixing.rows()) + " x " +
                          std::to_string(m.mixing.cols()) + " for " + std::to_string(m.spec.num_tasks()) +
                          " tasks and " + std::to_string(m.spec.latents) + " latents");
      for (Index d = 0; d < m.mixing.rows(); ++d)
        for (Index q = 0; q < m.mixing.cols(); ++q) *out++ = m.mixing(d, q);
    },
    [](Model& m, const double* in) {
      if (!m.spec.mixed()) return;
      m.mixing.resize(m.spec.num_tasks(), m.spec.latents);
      for (Index d = 0; d < m.mixing.rows(); ++d)
        for (Index q = 0; q < m.mixing.cols(); ++q) m.mixing(d, q) = *in++;
    },
    [](const Model& m, std::vector<std::string>& out) {
      if (!m.spec.mixed()) return;
      for (Index d = 0; d < m.spec.num_tasks(); ++d)
        for (Index q = 0; q < m.spec.latents; ++q) out.push_back("mixing" + idx(d, q));
    },
    [](const Model& m, const ModelGradient& g, double* out) {
      if (!m.spec.mixed()) return;
      for (Index d = 0; d < g.mixing.rows(); ++d)
        for (Index q = 0; q < g.mixing.cols(); ++q) *out++ = g.mixing(d, q);
    },
};

Index source_likelihood_size(const Model& m, Index s) {
  return static_cast<Index>(likelihood_of(m.spec.source(s).likelihood).param_names().size());
}

Index likelihood_size(const Model& m) {
  Index n = 0;
  for (Index s = 0; s < m.spec.num_sources(); ++s) n += source_likelihood_size(m, s);
  return n;
}

// A further source's parameters are named after it: "<source>.log_r".
std::string source_prefix(const Model& m, Index s) { return s == 0 ? "" : m.spec.source(s).name + "."; }

// Every source's own parameters, source after source.
const ParamBlock kLikelihood{
    ParamBlockId::likelihood,
    likelihood_size,
    [](const Model& m, double* out) {
      if (static_cast<Index>(m.more_sources.size()) != m.spec.num_sources() - 1)
        throw ConfigError("the model holds parameters of " + std::to_string(m.more_sources.size() + 1) +
                          " sources but its spec names " + std::to_string(m.spec.num_sources()));
      for (Index s = 0; s < m.spec.num_sources(); ++s) {
        const Index n = source_likelihood_size(m, s);
        const Vector& p = m.likelihood_params_of(s);
        if (p.size() != n)
          throw ConfigError("the model holds " + std::to_string(p.size()) + " likelihood parameters but likelihood '" +
                            to_string(m.spec.source(s).likelihood) + "' has " + std::to_string(n));
        Eigen::Map<Vector>(out, n) = p;
        out += n;
      }
    },
    [](Model& m, const double* in) {
      m.more_sources.resize(static_cast<size_t>(m.spec.num_sources() - 1));
      for (Index s = 0; s < m.spec.num_sources(); ++s) {
        const Index n = source_likelihood_size(m, s);
        m.likelihood_params_of(s) = Eigen::Map<const Vector>(in, n);
        in += n;
      }
    },
    [](const Model& m, std::vector<std::string>& out) {
      for (Index s = 0; s < m.spec.num_sources(); ++s)
        for (const auto& n : likelihood_of(m.spec.source(s).likelihood).param_names())
          out.push_back(source_prefix(m, s) + n);
    },
    [](const Model& m, const ModelGradient& g, double* out) {
      Eigen::Map<Vector>(out, likelihood_size(m)) = g.likelihood;
    },
};

Index unit_effect_size(const Model& m) {
  Index n = 0;
  for (Index s = 0; s < m.spec.num_sources(); ++s) n += m.spec.source(s).unit_effect ? 1 : 0;
  return n;
}

// log sigma_u of each source with a unit effect (the effect itself is integrated out of each bag's
// likelihood), held at or above kUnitLogSdFloor: a value below it is read as the floor
// (drop_gradient_past_floor drops the gradient that presses on it).
const ParamBlock kUnitEffect{
    ParamBlockId::unit_effect,
    unit_effect_size,
    [](const Model& m, double* out) {
      for (Index s = 0; s < m.spec.num_sources(); ++s)
        if (m.spec.source(s).unit_effect) *out++ = m.unit_effect_of(s).log_sd;
    },
    [](Model& m, const double* in) {
      m.more_sources.resize(static_cast<size_t>(m.spec.num_sources() - 1));
      for (Index s = 0; s < m.spec.num_sources(); ++s)
        if (m.spec.source(s).unit_effect) m.unit_effect_of(s).log_sd = std::max(*in++, kUnitLogSdFloor);
    },
    [](const Model& m, std::vector<std::string>& out) {
      for (Index s = 0; s < m.spec.num_sources(); ++s)
        if (m.spec.source(s).unit_effect) out.push_back(source_prefix(m, s) + "unit_effect.log_sd");
    },
    [](const Model& m, const ModelGradient& g, double* out) {
      Eigen::Map<Vector>(out, unit_effect_size(m)) = g.unit_effect;
    },
};

const ParamBlock kInducing{
    ParamBlockId::inducing,
    [](const Model& m) { return m.spec.learn_inducing ? m.inducing.size() : Index{0}; },
    [](const Model& m, double* out) {
      if (m.spec.learn_inducing) Eigen::Map<Vector>(out, m.inducing.size()) = m.inducing.reshaped();
    },
    [](Model& m, const double* in) {
      if (m.spec.learn_inducing) m.inducing.reshaped() = Eigen::Map<const Vector>(in, m.inducing.size());
    },
    [](const Model& m, std::vector<std::string>& out) {
      if (!m.spec.learn_inducing) return;
      for (Index j = 0; j < m.num_inducing(); ++j)
        for (Index d = 0; d < m.num_inputs(); ++d) out.push_back("inducing" + idx(d, j));
    },
    [](const Model& m, const ModelGradient& g, double* out) {
      if (m.spec.learn_inducing) Eigen::Map<Vector>(out, m.inducing.size()) = g.inducing.reshaped();
    },
};

}  // namespace

const std::vector<ParamBlock>& param_blocks() {
  static const std::vector<ParamBlock> blocks{kQMean,  kQChol,  kMean,       kTaskMeans,  kLinearMean,
                                              kKernel, kMixing, kLikelihood, kUnitEffect, kInducing};
  return blocks;
}

ParamSlice param_slice(const Model& model, ParamBlockId id) {
  ParamSlice s;
  for (const ParamBlock& b : param_blocks()) {
    s.size = b.size(model);
    if (b.id == id) return s;
    s.offset += s.size;
  }
  return {s.offset, 0};
}

ParamSlice staged_slice(const Model& model) {
  const ParamSlice lik = param_slice(model, ParamBlockId::likelihood);
  const ParamSlice unit = param_slice(model, ParamBlockId::unit_effect);
  bool later = false;
  for (Index s = 0; s < model.spec.num_sources(); ++s)
    later |= likelihood_of(model.spec.source(s).likelihood).fit_parameters_later();
  if (later) return {lik.offset, lik.size + unit.size};
  return unit;
}

Index source_likelihood_offset(const Model& model, Index s) {
  Index k = 0;
  for (Index t = 0; t < s; ++t) k += source_likelihood_size(model, t);
  return k;
}

Index source_unit_effect_offset(const Model& model, Index s) {
  Index k = 0;
  for (Index t = 0; t < s; ++t) k += model.spec.source(t).unit_effect ? 1 : 0;
  return k;
}

void drop_gradient_past_floor(const Model& model, Vector& grad) {
  const Index offset = param_slice(model, ParamBlockId::unit_effect).offset;
  for (Index s = 0; s < model.spec.num_sources(); ++s) {
    if (!model.spec.source(s).unit_effect || model.unit_effect_of(s).log_sd > kUnitLogSdFloor) continue;
    double& g = grad[offset + source_unit_effect_offset(model, s)];
    if (g < 0) g = 0;
  }
}

Index Model::num_params() const {
  Index n = 0;
  for (const ParamBlock& b : param_blocks()) n += b.size(*this);
  return n;
}

Vector Model::pack() const {
  Vector theta(num_params());
  Index k = 0;
  for (const ParamBlock& b : param_blocks()) {
    b.pack(*this, theta.data() + k);
    k += b.size(*this);
  }
  return theta;
}

void Model::unpack(const Vector& theta) {
  if (theta.size() != num_params())
    throw ConfigError("a parameter vector of " + std::to_string(theta.size()) + " entries does not fit a model of " +
                      std::to_string(num_params()));
  Index k = 0;
  for (const ParamBlock& b : param_blocks()) {
    // Sizes are read before unpacking: a block may change what a later one sees.
    const Index n = b.size(*this);
    b.unpack(*this, theta.data() + k);
    k += n;
  }
}

std::vector<std::string> Model::param_names() const {
  std::vector<std::string> names;
  for (const ParamBlock& b : param_blocks()) b.names(*this, names);
  return names;
}

Vector ModelGradient::pack(const Model& m) const {
  Vector g(m.num_params());
  Index k = 0;
  for (const ParamBlock& b : param_blocks()) {
    b.pack_gradient(m, *this, g.data() + k);
    k += b.size(m);
  }
  return g;
}

}  // namespace vbagg
