#include "objective.hpp"

#include <omp.h>

#include <algorithm>
#include <map>
#include <stdexcept>

#include "bag_pass.hpp"
#include "denormals.hpp"
#include "feature_store.hpp"
#include "likelihood.hpp"
#include "likelihoods/count.hpp"
#include "linalg.hpp"
#include "param_layout.hpp"
#include "shard.hpp"

namespace vbagg {

namespace {

// The accumulators of the evaluations run from this thread, kept between them.
std::vector<Accumulator>& accumulator_pool() {
  static thread_local std::vector<Accumulator> pool;
  return pool;
}

// The per-thread scratch of the evaluations run from this thread, kept between them like the
// accumulators: allocated afresh, a full pass's block buffers were faulted in again on every call
// (on the 300,000-pixel benchmark country, 30 epochs and 13 full evaluations took 862,000 page
// faults; kept, 467,000).
std::vector<Workspace>& workspace_pool(int threads) {
  static thread_local std::vector<Workspace> pool;
  if (pool.size() < static_cast<size_t>(threads)) pool.resize(static_cast<size_t>(threads));
  return pool;
}

// The listed bags whose unit effect is shared with other listed bags of their unit (its periods),
// by unit (unit_groups without the bags alone), each unit's bags in the order of the whole data so
// that its term does not depend on how they were listed.
std::vector<std::vector<size_t>> shared_units(const Model& model, const Dataset& data, const std::vector<Index>& bags) {
  std::vector<std::vector<size_t>> units = unit_groups(model.spec, data, bags);
  // A unit of one bag is the bag's own term, taken in one pass like any other bag.
  units.erase(std::remove_if(units.begin(), units.end(), [](const auto& u) { return u.size() < 2; }), units.end());
  for (auto& u : units)
    std::sort(u.begin(), u.end(),
              [&](size_t x, size_t y) { return data.global_bag_of(bags[x]) < data.global_bag_of(bags[y]); });
  return units;
}

// One unit's term over its bags' moments (shared_unit_effect_score): its value, the derivatives
// with respect to each bag's moments, its likelihood parameters and log sigma_u.
struct UnitTerm {
  double value = 0;
  std::vector<CountMomentsGradient> d;
  Vector g_params;
  double g_log_sd = 0;
};

// The accumulated gradient with respect to Q, whole.
Matrix gradient_Q(const Accumulator& acc) {
  Matrix gQ = acc.g_Q_lower.selfadjointView<Eigen::Lower>();
  if (acc.g_Q.size()) gQ += 0.5 * (acc.g_Q + acc.g_Q.transpose());
  return gQ;
}

// From one task's accumulated gradients with respect to alpha, Q and B of its posterior to q's
// moments m_v and S_v (ObjectiveValue::grad_q_mean, grad_q_cov).
void add_q_moments_gradient(const Model& model, const Posterior& post, const Accumulator& acc, const Matrix& gQ,
                            ObjectiveValue& moments) {
  const Matrix& Lambda = post.Lambda;
  moments.grad_q_mean += Lambda * acc.g_alpha;
  Matrix gS = -(Lambda * gQ * Lambda.transpose());
  if (acc.g_B.size())
    gS += 0.5 * model.q_chol.triangularView<Eigen::Lower>().transpose().solve(acc.g_B * Lambda.transpose());
  moments.grad_q_cov += 0.5 * (gS + gS.transpose());
}

// From one task's accumulated gradients with respect to (alpha, Q, B) of its posterior to (m_v,
// L_v), its intercept and mixing weights, and dL/dLinv (the unscaled, shared L^{-1}) and dL/dk_q(x,x)
// per latent, which finish_gradient takes through the Cholesky of K_WW.
void task_gradient(const Model& model, const Posterior& post, const Accumulator& acc, ModelGradient& g,
                   ObjectiveValue* moments, Matrix& gLinv, Vector& g_latent_kdiag, int threads) {
  const Matrix gQ = gradient_Q(acc);
  const Matrix& Lambda = post.Lambda;  // lower triangular, as L_v
  const Index M = model.num_inducing(), Mq = model.num_q(), d = post.task;
  const auto Lv = model.q_chol.triangularView<Eigen::Lower>();
  if (moments) add_q_moments_gradient(model, post, acc, gQ, *moments);
  // Each M x M product by fixed column blocks over the threads (linalg.hpp), with the triangular
  // factors as such.
  Matrix gB(Mq, Mq);
  for_column_blocks(Mq, threads, [&](Index j, Index w) {
    gB.middleCols(j, w).noalias() = -2.0 * post.B * gQ.middleCols(j, w);
    if (acc.g_B.size()) gB.middleCols(j, w) += acc.g_B.middleCols(j, w);
  });
  Matrix gLambda(Mq, Mq);
  for_column_blocks(Mq, threads, [&](Index j, Index w) {
    gLambda.middleCols(j, w).noalias() = model.q_mean * acc.g_alpha.segment(j, w).transpose();
    gLambda.middleCols(j, w).noalias() += Lv * gB.middleCols(j, w);
  });
  Matrix gLambdaW = gLambda.topLeftCorner(M, M);
  Matrix gPrior = gQ.topLeftCorner(M, M);  // Q and P = Q + B^T B share the prior part
  if (acc.g_P_lower.size()) gPrior += Matrix(acc.g_P_lower.selfadjointView<Eigen::Lower>()).topLeftCorner(M, M);
  const auto LambdaW = Lambda.topLeftCorner(M, M).triangularView<Eigen::Lower>();
  for_column_blocks(M, threads, [&](Index j, Index w) {
    const Matrix product = LambdaW * gPrior.middleCols(j, w);
    gLambdaW.middleCols(j, w) += 2.0 * product;
  });
  // The lower triangle of Lambda gB^T: rows j.. of columns j.., from rows j.. of Lambda.
  Matrix gLchol = Matrix::Zero(Mq, Mq);
  for_column_blocks(Mq, threads, [&](Index j, Index w) {
    gLchol.block(j, j, Mq - j, w).noalias() = Lambda.bottomRows(Mq - j) * gB.middleRows(j, w).transpose();
    gLchol.block(j, j, w, w).triangularView<Eigen::StrictlyUpper>().setZero();
  });
  g.q_chol += gLchol;
  g.q_mean += Lambda * acc.g_alpha;
  if (d == 0)
    g.mean += acc.g_mean;
  else
    g.task_means[d - 1] += acc.g_mean;
  g.linear_mean += acc.g_linear;
  g.likelihood += acc.g_likelihood;
  g.unit_effect += acc.g_unit;
  g.kernel += acc.g_kernel;
  g.inducing += acc.g_inducing;
  // Latent q's block of Lambda_W is w_dq L_q^{-1}, and the task's k(x,x) is sum_q w_dq^2 k_q(x,x).
  for (Index q = 0; q < model.num_latents(); ++q) {
    const Index b = model.latent_begin(q), n = model.latent_size(q);
    const double w = model.weight(d, q);
    const auto G = gLambdaW.block(b, b, n, n);
    gLinv.block(b, b, n, n) += w * G;
    g_latent_kdiag[q] += w * w * acc.g_kdiag;
    if (model.spec.mixed())
      g.mixing(d, q) +=
          G.cwiseProduct(post.Linv.block(b, b, n, n)).sum() + 2.0 * w * post.latent_kdiag[q] * acc.g_kdiag;
  }
}

// From dL/dLinv and dL/dk_q(x,x) through the Cholesky of the block-diagonal K_WW + eps I to every
// latent's kernel and inducing inputs.
void finish_gradient(const Model& model, const Posterior& post, const Matrix& gLinv, const Vector& g_latent_kdiag,
                     ModelGradient& g, int threads) {
  const Matrix& Linv = post.Linv;
  const Index M = Linv.rows();
  // gL = lower(-L^{-T} gLinv L^{-T}). Column c of gLinv L^{-T} reads columns ..c of gLinv, as
  // L^{-T} is upper triangular; its lower rows j.. take rows j.. of L^{-T} (upper) from the left.
  Matrix gL = Matrix::Zero(M, M);
  for_column_blocks(M, threads, [&](Index j, Index w) {
    const Matrix right = gLinv.leftCols(j + w) * Linv.block(j, 0, w, j + w).transpose();
    gL.block(j, j, M - j, w).noalias() =
        Linv.bottomRightCorner(M - j, M - j).transpose().triangularView<Eigen::Upper>() * right.bottomRows(M - j);
    gL.block(j, j, M - j, w) *= -1.0;
    gL.block(j, j, w, w).triangularView<Eigen::StrictlyUpper>().setZero();
  });
  const Matrix gK = cholesky_backward(post.L, Linv, gL, threads);
  Index k = 0;
  for (Index q = 0; q < model.num_latents(); ++q) {
    const Kernel& kernel = model.kernel_of(q);
    const Index b = model.latent_begin(q), n = model.latent_size(q), np = kernel.num_params();
    const Matrix gKq = gK.block(b, b, n, n);
    Vector gk = Vector::Zero(np);
    // eps_q = jitter * k_q(x,x)
    kernel.diag_backward(g_latent_kdiag[q] + post.jitter_used * gKq.trace(), gk);
    KernelCache cache;
    Matrix Kww;
    const Matrix W = model.inducing.middleCols(b, n);
    kernel.cross(W, W, Kww, &cache);
    Matrix gW = Matrix::Zero(model.num_inputs(), n);
    kernel.cross_backward(gKq, cache, gk, model.spec.learn_inducing ? &gW : nullptr);
    g.kernel.segment(k, np) += gk;
    g.inducing.middleCols(b, n) += 2.0 * gW;  // W appears on both sides of K_WW and gK is symmetric
    k += np;
  }
}

// The data term and its gradients are linear in the bags: a data-parallel run sums each process's
// share, with a flag that says whether any process failed, in one reduction. The gradient is
// reduced rather than the bag accumulators: it is what the optimiser needs, and every process
// already holds the posterior to map its accumulators back.
void sum_over_processes(const Collective& processes, const std::exception_ptr& failure, ObjectiveValue& out,
                        Vector& g_data) {
  const Index Mq = out.grad_q_mean.size();
  Vector part(2 + g_data.size() + Mq + Mq * Mq);
  part[0] = failure ? 1.0 : 0.0;
  part[1] = failure ? 0.0 : out.data_term;
  Index k = 2;
  auto take = [&](double* x, Index n) {
    if (!failure)
      part.segment(k, n) = Eigen::Map<const Vector>(x, n);
    else
      part.segment(k, n).setZero();
    k += n;
  };
  take(g_data.data(), g_data.size());
  take(out.grad_q_mean.data(), Mq);
  take(out.grad_q_cov.data(), Mq * Mq);
  processes.sum(part);
  if (part[0] > 0) {
    if (failure) std::rethrow_exception(failure);
    throw NumericalError("another process could not evaluate the objective on its bags");
  }
  out.data_term = part[1];
  k = 2;
  auto give = [&](double* x, Index n) {
    Eigen::Map<Vector>(x, n) = part.segment(k, n);
    k += n;
  };
  give(g_data.data(), g_data.size());
  give(out.grad_q_mean.data(), Mq);
  give(out.grad_q_cov.data(), Mq * Mq);
}

}  // namespace

ObjectiveValue elbo(const Model& model, const Dataset& data, const std::vector<Index>& bags, double scale, Vector* grad,
                    const ObjectiveOptions& options) {
  const FlushDenormals flush;
  model.spec.validate();
  if (data.num_inputs() != model.num_inputs())
    throw DataError("the data have " + std::to_string(data.num_inputs()) + " inputs but the model expects " +
                    std::to_string(model.num_inputs()));
  if (model.spec.linear_inputs > model.num_inputs())
    throw ConfigError("the linear mean has " + std::to_string(model.spec.linear_inputs) +
                      " coefficients but the model " + std::to_string(model.num_inputs()) + " inputs");
  // One posterior per task from one factorisation of K_WW: the tasks differ only in how Lambda's
  // blocks are scaled.
  const Index tasks = model.spec.num_tasks();
  const int threads = std::max(1, options.threads);
  const InducingFactor factor = factor_inducing(model, threads);
  std::vector<Posterior> posts;
  for (Index d = 0; d < tasks; ++d) posts.push_back(compute_posterior(model, factor, d, threads));
  std::vector<SourceTerm> sources;
  std::vector<BagNeeds> needs;
  for (Index s = 0; s < model.spec.num_sources(); ++s) {
    SourceTerm t;
    t.spec = model.spec.for_source(s);
    t.post = &posts[static_cast<size_t>(t.spec.task)];
    t.params = &model.likelihood_params_of(s);
    t.unit_log_sd = model.unit_effect_of(s).log_sd;
    t.likelihood_offset = source_likelihood_offset(model, s);
    t.unit_offset = source_unit_effect_offset(model, s);
    t.needs = bag_needs(t.spec);
    t.residual_cap = residual_cap_of(t.spec, t.needs);
    needs.push_back(t.needs);
    sources.push_back(std::move(t));
  }
  // A one-source model (also a source's view of a joint one) reads every bag with its one
  // observation model, whatever source the bag came from.
  const bool joint = model.spec.num_sources() > 1;
  const Collective& processes = options.processes ? *options.processes : one_process();
  // A bag of a source the model lacks is a failure of this process's share: in a data-parallel
  // run the others learn of it in the reduction.
  std::exception_ptr failure;
  for (Index a : bags)
    if (joint && data.source_of(a) >= model.spec.num_sources() && !failure)
      failure = std::make_exception_ptr(DataError("bag " + data.bag_name(a) + " is of source " +
                                                  std::to_string(data.source_of(a)) + " but the model has " +
                                                  std::to_string(model.spec.num_sources()) + " sources"));
  if (failure && processes.size() == 1) std::rethrow_exception(failure);
  const bool with_grad = grad != nullptr;
  // q's moments alone (ObjectiveOptions::q_moments_only): a MAP estimate has no covariance.
  if (options.q_moments_only && !(options.q_moments_gradient && !model.spec.map_estimate))
    throw std::invalid_argument("q_moments_only needs q_moments_gradient and a model with a variational q");
  const bool q_only = with_grad && options.q_moments_only;
  // The store is read or filled by this pass alone: however the pass ends, it is left closed.
  FeatureStorePass features(q_only ? options.features : nullptr, model, data, bags);
  const Index Mq = model.num_q(), D = model.num_inputs(), P = model.num_kernel_params();
  const Index M = model.num_inducing();
  const int slots = std::max({1, options.slots, options.threads});
  const Index unit_params = with_grad ? param_slice(model, ParamBlockId::unit_effect).size : 0;

  // acc[s * tasks + d]: slot s's sums over the bags of task d.
  std::vector<Accumulator>& acc = accumulator_pool();
  if (acc.size() < static_cast<size_t>(slots * tasks)) acc.resize(static_cast<size_t>(slots * tasks));
  for (int s = 0; s < slots * tasks; ++s)
    acc[static_cast<size_t>(s)].reset(
        with_grad ? Mq : 0, with_grad ? D : 0, with_grad ? M : 0, P, model.spec.num_linear_coefficients(),
        param_slice(model, ParamBlockId::likelihood).size, unit_params, with_grad ? needs : std::vector<BagNeeds>{});

  // Bags sharing their unit's effect take two passes around their unit's term: their moments
  // first, then the way back from the unit term's derivatives (SharedUnitPass).
  const std::vector<std::vector<size_t>> units = shared_units(model, data, bags);
  std::vector<int> unit_of(bags.size(), -1);
  std::vector<size_t> place(bags.size(), 0);  // the bag's place among its unit's
  for (size_t u = 0; u < units.size(); ++u)
    for (size_t j = 0; j < units[u].size(); ++j) {
      unit_of[units[u][j]] = static_cast<int>(u);
      place[units[u][j]] = j;
    }
  std::vector<CountMoments> unit_moments(units.empty() ? 0 : bags.size());
  std::vector<UnitTerm> unit_terms(units.size());
  auto source_of = [&](size_t k) -> const SourceTerm& {
    return sources[joint ? static_cast<size_t>(data.source_of(bags[k])) : 0];
  };
  // With a gradient, a shared bag's forward pass is kept from its moments to its way back, so that
  // it runs once. When every shared bag's fits cache_mb (a minibatch), the step takes every bag's
  // moments over the slots, then the units' terms, then the way back, which spreads a unit's bags
  // over the threads. When they do not (a full pass of a space-time fit would keep gigabytes), it
  // sweeps by unit: a slot takes whole units, and runs each unit's bags forward, its term, then
  // its bags' way back, so that a thread keeps one unit's forward passes (in its share of
  // cache_mb) at a time. A bag that does not fit runs forward again on its way back; either way
  // the numbers are the same.
  const double budget = options.cache_mb * 1048576.0;
  std::vector<double> need(bags.size(), 0.0);  // the bytes a shared bag's kept forward pass takes
  double shared_need = 0;
  if (with_grad)
    for (size_t k = 0; k < bags.size(); ++k)
      if (unit_of[k] >= 0) {
        need[k] = kept_bytes(model, source_of(k).needs, source_of(k).residual_cap, data.bag_size(bags[k]), options);
        shared_need += need[k];
      }
  const bool by_unit = shared_need > budget;

  // The bags are shared over the slots by their pixels, largest first to the least loaded slot
  // (so the largest lands in slot 0), a unit's together when sweeping by unit; slots are spread
  // over threads, and each thread keeps one workspace for all its slots. A slot's bags depend on
  // the bag list (and the cache budget) only, never on the threads.
  std::vector<Index> pixels(bags.size());
  for (size_t k = 0; k < bags.size(); ++k) pixels[k] = data.bag_size(bags[k]);
  if (by_unit)
    for (const auto& unit : units)
      for (size_t j = 1; j < unit.size(); ++j) {
        pixels[unit[0]] += pixels[unit[j]];
        pixels[unit[j]] = 0;
      }
  std::vector<int> slot_of = assign_bags(pixels, slots);
  if (by_unit)
    for (const auto& unit : units)
      for (size_t k : unit) slot_of[k] = slot_of[unit[0]];
  std::vector<std::exception_ptr> errors(slots);
  std::vector<Workspace>& workspaces = workspace_pool(threads);
  std::vector<int> kept_at(bags.size(), -1);
  KeptForwards& kept = kept_forwards();
  if (with_grad && !by_unit) {
    size_t next = 0;
    for (size_t k = 0; k < bags.size(); ++k)
      if (unit_of[k] >= 0) kept_at[k] = kept.take(next, need[k], budget);
  }
  // Unit u's term from its bags' moments.
  auto unit_term = [&](size_t u) {
    const SourceTerm& src = source_of(units[u][0]);
    std::vector<double> y;
    std::vector<CountMoments> mo;
    for (size_t k : units[u]) {
      y.push_back(data.response[bags[k]]);
      mo.push_back(unit_moments[k]);
    }
    UnitTerm& t = unit_terms[u];
    t.value = shared_unit_effect_score(dynamic_cast<const CountLikelihood&>(likelihood_of(src.spec.likelihood)), y, mo,
                                       *src.params, src.unit_log_sd, with_grad ? &t.d : nullptr,
                                       with_grad ? &t.g_params : nullptr, with_grad ? &t.g_log_sd : nullptr);
  };
  // Unit u's bags forward, its term, and their way back, in slot s on the workspace's thread.
  auto sweep_unit = [&](size_t u, int s, Workspace& ws) {
    const SourceTerm& src = source_of(units[u][0]);
    Accumulator& into = acc[static_cast<size_t>(s * tasks + src.spec.task)];
    KeptForwards& own = ws.unit;
    // Every holder is taken before any pass fills one: taking one may move the others.
    std::vector<int> at(units[u].size(), -1);
    size_t next = 0;
    for (size_t j = 0; j < units[u].size(); ++j) at[j] = own.take(next, need[units[u][j]], budget / threads);
    for (size_t j = 0; j < units[u].size(); ++j) {
      const size_t k = units[u][j];
      SharedUnitPass shared;
      shared.record = &unit_moments[k];
      if (at[j] < 0) {
        process_bag(model, *src.post, data, bags[k], scale, src, false, options, shared, ws, into);
        continue;
      }
      const size_t h = static_cast<size_t>(at[j]);
      bag_forward(model, *src.post, data, bags[k], src, true, true, options, own.blocks[h], own.bags[h]);
      bag_term_of(model, *src.post, data, own.bags[h], src, options, shared, nullptr);
    }
    unit_term(u);
    for (size_t j = 0; j < units[u].size(); ++j) {
      SharedUnitPass shared;
      shared.given = &unit_terms[u].d[j];
      if (at[j] < 0) {
        process_bag(model, *src.post, data, bags[units[u][j]], scale, src, true, options, shared, ws, into);
        continue;
      }
      BagForward& f = own.bags[static_cast<size_t>(at[j])];
      BagGradient g;
      bag_term_of(model, *src.post, data, f, src, options, shared, &g);
      bag_backward(model, *src.post, data, f, scale, src, options, g, ws, into);
    }
  };
  // pass 0: every bag, the shared ones' moments only (or their whole sweep by unit); pass 1: the
  // shared ones' way back. Slots are taken dynamically in order: a slot's bags and its accumulator
  // do not depend on which thread runs it, and the largest bags start first, so minibatches of a
  // few bags of very different sizes stay balanced.
  auto run_slots = [&](int pass) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int s = 0; s < slots; ++s) {
      if (failure) continue;  // the bags cannot be evaluated: only the reduction is left
      const FlushDenormals flush_here;
      try {
        Workspace& ws = workspaces[omp_get_thread_num()];
        for (size_t k = 0; k < bags.size(); ++k) {
          if (slot_of[k] != s || (pass == 1 && unit_of[k] < 0)) continue;
          if (by_unit && unit_of[k] >= 0) {
            if (place[k] == 0) sweep_unit(static_cast<size_t>(unit_of[k]), s, ws);
            continue;
          }
          SharedUnitPass shared;
          if (unit_of[k] >= 0 && pass == 0) shared.record = &unit_moments[k];
          if (unit_of[k] >= 0 && pass == 1) shared.given = &unit_terms[static_cast<size_t>(unit_of[k])].d[place[k]];
          const SourceTerm& src = source_of(k);
          Accumulator& into = acc[static_cast<size_t>(s * tasks + src.spec.task)];
          if (kept_at[k] < 0) {
            process_bag(model, *src.post, data, bags[k], scale, src, with_grad && !shared.record, options, shared, ws,
                        into);
            continue;
          }
          BagForward& f = kept.bags[static_cast<size_t>(kept_at[k])];
          if (pass == 0) {
            bag_forward(model, *src.post, data, bags[k], src, true, true, options,
                        kept.blocks[static_cast<size_t>(kept_at[k])], f);
            bag_term_of(model, *src.post, data, f, src, options, shared, nullptr);
          } else {
            BagGradient g;
            bag_term_of(model, *src.post, data, f, src, options, shared, &g);
            bag_backward(model, *src.post, data, f, scale, src, options, g, ws, into);
          }
        }
      } catch (...) {
        errors[s] = std::current_exception();
      }
    }
    for (auto& e : errors)
      if (e && !failure) failure = e;
  };
  run_slots(0);
  if (!units.empty() && !failure && !by_unit) {
    std::vector<std::exception_ptr> unit_errors(units.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (size_t u = 0; u < units.size(); ++u) {
      const FlushDenormals flush_here;
      try {
        unit_term(u);
      } catch (...) {
        unit_errors[u] = std::current_exception();
      }
    }
    for (auto& e : unit_errors)
      if (e && !failure) failure = e;
    if (with_grad && !failure) run_slots(1);
  }
  features.completed = !failure;
  // One process raises its error at once; in a data-parallel run every process first learns
  // whether any failed, in the reduction below, so that all of them leave the step together.
  if (failure && processes.size() == 1) std::rethrow_exception(failure);
  for (Index d = 0; d < tasks; ++d)
    for (int s = 1; s < slots; ++s) acc[static_cast<size_t>(d)].add_small(acc[static_cast<size_t>(s * tasks + d)]);
  // The M x M sums by column blocks over the threads, each column in slot order.
  if (with_grad)
    for_column_blocks(Mq, threads, [&](Index j, Index w) {
      for (Index d = 0; d < tasks; ++d)
        for (int s = 1; s < slots; ++s)
          acc[static_cast<size_t>(d)].add_columns(acc[static_cast<size_t>(s * tasks + d)], j, w);
    });

  // The unit terms, in unit order, into their task's sums.
  for (size_t u = 0; u < units.size() && !failure; ++u) {
    const SourceTerm& src = source_of(units[u][0]);
    Accumulator& a = acc[static_cast<size_t>(src.spec.task)];
    const UnitTerm& t = unit_terms[u];
    a.value += t.value;
    if (!with_grad) continue;
    a.g_unit[src.unit_offset] += scale * t.g_log_sd;
    if (t.g_params.size()) a.g_likelihood.segment(src.likelihood_offset, t.g_params.size()) += scale * t.g_params;
  }
  ObjectiveValue out;
  for (Index d = 0; d < tasks; ++d) out.data_term += acc[static_cast<size_t>(d)].value;
  out.jitter_used = posts[0].jitter_used;
  const bool moments = with_grad && options.q_moments_gradient && !model.spec.map_estimate;
  if (moments) {
    out.grad_q_mean = Vector::Zero(Mq);
    out.grad_q_cov = Matrix::Zero(Mq, Mq);
  }
  ModelGradient g(model);
  if (q_only) {
    if (!failure)
      for (Index d = 0; d < tasks; ++d) {
        const Accumulator& a = acc[static_cast<size_t>(d)];
        add_q_moments_gradient(model, posts[static_cast<size_t>(d)], a, gradient_Q(a), out);
      }
  } else if (with_grad && !failure) {
    Matrix gLinv = Matrix::Zero(M, M);
    Vector g_latent_kdiag = Vector::Zero(model.num_latents());
    for (Index d = 0; d < tasks; ++d)
      task_gradient(model, posts[static_cast<size_t>(d)], acc[static_cast<size_t>(d)], g, moments ? &out : nullptr,
                    gLinv, g_latent_kdiag, threads);
    finish_gradient(model, posts[0], gLinv, g_latent_kdiag, g, threads);
  }
  Vector g_data = with_grad && !q_only ? g.pack(model) : Vector();
  if (processes.size() > 1) sum_over_processes(processes, failure, out, g_data);
  ModelGradient gkl(model);
  out.kl = kl_divergence(model, with_grad && !q_only ? &gkl : nullptr);
  out.elbo = scale * out.data_term - out.kl;
  if (q_only) {
    grad->resize(0);
  } else if (with_grad) {
    *grad = g_data - gkl.pack(model);
    drop_gradient_past_floor(model, *grad);
  }
  return out;
}

std::vector<std::vector<size_t>> unit_groups(const ModelSpec& spec, const Dataset& data,
                                             const std::vector<Index>& bags) {
  std::vector<std::vector<size_t>> groups;
  std::map<std::pair<int, std::string>, size_t> index;
  for (size_t k = 0; k < bags.size(); ++k) {
    // A one-source model (also a source's view of a joint one) reads every bag as its own source's.
    const int s = spec.num_sources() > 1 ? data.source_of(bags[k]) : 0;
    if (!spec.unit_effect_shared || !spec.source(s).unit_effect) {
      groups.push_back({k});
      continue;
    }
    const auto [it, added] = index.emplace(std::make_pair(s, unit_of_bag(data.bag_id(bags[k]))), groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(k);
  }
  return groups;
}

ObjectiveValue elbo(const Model& model, const Dataset& data, Vector* grad, const ObjectiveOptions& options) {
  std::vector<Index> all(data.num_bags());
  for (Index a = 0; a < data.num_bags(); ++a) all[a] = a;
  return elbo(model, data, all, 1.0, grad, options);
}

}  // namespace vbagg
