#include "objective.hpp"

#include <omp.h>

#include "likelihood.hpp"
#include "linalg.hpp"

namespace vbagg {

namespace {

// Gradient accumulators of one slot, with respect to the per-evaluation quantities of Posterior:
// alpha, Q, B, mu, k(x,x), the kernel (through K_Wa and K_aa), the noise and W.
struct Accumulator {
  double value = 0;
  Vector g_alpha;
  Matrix g_Q_lower;  // rank updates, lower triangle only
  Matrix g_Q;        // general updates
  Matrix g_B;
  double g_mean = 0, g_kdiag = 0, g_log_noise = 0;
  Vector g_kernel;
  Matrix g_inducing;

  Accumulator(Index M, Index D, Index P, bool with_B) {
    g_alpha = Vector::Zero(M);
    g_Q_lower = Matrix::Zero(M, M);
    g_Q = Matrix::Zero(M, M);
    if (with_B) g_B = Matrix::Zero(M, M);
    g_kernel = Vector::Zero(P);
    g_inducing = Matrix::Zero(D, M);
  }
  void add(const Accumulator& o) {
    value += o.value;
    g_alpha += o.g_alpha;
    g_Q_lower += o.g_Q_lower;
    g_Q += o.g_Q;
    if (g_B.size()) g_B += o.g_B;
    g_mean += o.g_mean;
    g_kdiag += o.g_kdiag;
    g_log_noise += o.g_log_noise;
    g_kernel += o.g_kernel;
    g_inducing += o.g_inducing;
  }
};

// Scratch of one pixel block, kept between the forward and backward pass of a bag.
struct BlockScratch {
  Matrix K;            // k(W, X_block), M x len
  Matrix R;            // Q K
  KernelCache kernel;  // squared distances for the kernel backward
};

// Per-slot scratch, reused from bag to bag so the large buffers are allocated once per slot.
struct Workspace {
  std::vector<BlockScratch> blocks;
  Matrix dK, U;
};

// K, R and the kernel cache of pixels [begin, begin + len) of the data.
void forward_block(const Model& model, const Posterior& post, const Dataset& data, Index begin, Index len,
                   bool with_grad, BlockScratch& b) {
  const Matrix X = data.inputs.middleCols(begin, len);
  model.kernel.cross(model.inducing, X, b.K, with_grad ? &b.kernel : nullptr);
  b.R.noalias() = post.Q * b.K;
}

// One bag, in blocks of pixels: forward to m, s2 (and T or C), the bag term, then backward into
// acc. The blocks' K and R are kept for the backward pass while they fit in the cache budget and
// recomputed otherwise, so memory stays bounded whatever the bag size.
void process_bag(const Model& model, const Posterior& post, const Dataset& data, Index a, double scale, BagNeeds needs,
                 bool with_grad, const ObjectiveOptions& opt, Workspace& ws, Accumulator& acc) {
  const Index begin = data.bag_begin(a), n = data.bag_size(a), M = model.num_inducing();
  // The exact covariance couples every pair of pixels: that mode takes the bag as one block.
  const Index block = needs == BagNeeds::exact ? n : std::max<Index>(1, opt.block);
  const Index blocks = (n + block - 1) / block;
  const double bytes_per_block = static_cast<double>(M) * static_cast<double>(block) * 8.0 *
                                 (2.0 + static_cast<double>(model.kernel.parts().size()));
  const bool keep = blocks == 1 || blocks * bytes_per_block <= opt.cache_mb * 1048576.0;
  if (static_cast<Index>(ws.blocks.size()) < (keep ? blocks : 1)) ws.blocks.resize(keep ? blocks : 1);
  auto scratch = [&](Index b) -> BlockScratch& { return ws.blocks[keep ? b : 0]; };
  auto len_of = [&](Index b) { return std::min(block, n - b * block); };

  const Vector w = data.coverage.segment(begin, n).cwiseProduct(data.population.segment(begin, n));
  Vector m(n), s2(n);
  Matrix T, C;
  if (needs == BagNeeds::nystrom) T.resize(M, n);
  for (Index b = 0; b < blocks; ++b) {
    BlockScratch& sb = scratch(b);
    const Index off = b * block, len = len_of(b);
    forward_block(model, post, data, begin + off, len, with_grad, sb);
    m.segment(off, len).noalias() = sb.K.transpose() * post.alpha;
    if (model.spec.map_estimate)
      s2.segment(off, len).setZero();  // the likelihood is evaluated at f = m
    else
      s2.segment(off, len) =
          (post.kdiag - sb.K.cwiseProduct(sb.R).colwise().sum().array()).cwiseMax(0.0).matrix().transpose();
    if (needs == BagNeeds::nystrom) {
      if (model.spec.map_estimate)
        T.middleCols(off, len).setZero();  // a point mass has no covariance
      else
        T.middleCols(off, len).noalias() = post.B * sb.K;
    }
  }
  m.array() += model.mean;
  KernelCache aa_cache;
  if (needs == BagNeeds::exact) {
    const Matrix Xa = data.inputs.middleCols(begin, n);
    model.kernel.cross(Xa, Xa, C, with_grad ? &aa_cache : nullptr);
    C.noalias() -= ws.blocks[0].K.transpose() * ws.blocks[0].R;
  }
  BagPosterior bag{m, s2, w, data.response[a], T.size() ? &T : nullptr, C.size() ? &C : nullptr};
  BagGradient g;
  acc.value += bag_term(model.spec, model.log_noise, bag, with_grad ? &g : nullptr);
  if (!with_grad) return;

  g.gm *= scale;
  g.gs2 *= model.spec.map_estimate ? 0.0 : scale;  // s2 = 0 does not depend on the parameters
  acc.g_log_noise += scale * g.g_log_noise;
  acc.g_mean += g.gm.sum();
  acc.g_kdiag += g.gs2.sum();
  if (needs == BagNeeds::nystrom) g.gT *= scale;
  Matrix gCsym;
  if (needs == BagNeeds::exact) {
    g.gC *= scale;
    gCsym = 0.5 * (g.gC + g.gC.transpose());
    const Matrix Xa = data.inputs.middleCols(begin, n);
    model.kernel.cross_backward(Xa, Xa, gCsym, aa_cache, acc.g_kernel, nullptr);
  }
  for (Index b = 0; b < blocks; ++b) {
    BlockScratch& sb = scratch(b);
    const Index off = b * block, len = len_of(b);
    if (!keep) forward_block(model, post, data, begin + off, len, true, sb);
    const Matrix& K = sb.K;
    const auto gm = g.gm.segment(off, len);
    const auto gs2 = g.gs2.segment(off, len);
    acc.g_alpha.noalias() += K * gm;
    // s2 = k - diag(K^T Q K): dQ = -K diag(gs2) K^T, split by sign into two symmetric rank updates.
    const Vector pos = gs2.cwiseMax(0.0).cwiseSqrt(), neg = (-gs2).cwiseMax(0.0).cwiseSqrt();
    if (pos.any()) {
      ws.U.noalias() = K * pos.asDiagonal();
      acc.g_Q_lower.selfadjointView<Eigen::Lower>().rankUpdate(ws.U, -1.0);
    }
    if (neg.any()) {
      ws.U.noalias() = K * neg.asDiagonal();
      acc.g_Q_lower.selfadjointView<Eigen::Lower>().rankUpdate(ws.U, 1.0);
    }
    // dL/dK_W,block from m and s2 (and T or C).
    ws.dK.noalias() = post.alpha * gm.transpose();
    ws.dK.noalias() -= 2.0 * sb.R * gs2.asDiagonal();
    if (needs == BagNeeds::nystrom) {
      acc.g_B.noalias() += g.gT.middleCols(off, len) * K.transpose();
      ws.dK.noalias() += post.B.transpose() * g.gT.middleCols(off, len);
    }
    if (needs == BagNeeds::exact) {
      acc.g_Q.noalias() -= (K * gCsym) * K.transpose();
      ws.dK.noalias() -= 2.0 * sb.R * gCsym;
    }
    model.kernel.cross_backward(model.inducing, data.inputs.middleCols(begin + off, len), ws.dK, sb.kernel,
                                acc.g_kernel, model.spec.learn_inducing ? &acc.g_inducing : nullptr);
  }
}

// From the accumulated gradients with respect to (alpha, Q, B) to (m_v, L_v, L_W) and then
// through the Cholesky of K_WW to the kernel and W.
void finish_gradient(const Model& model, const Posterior& post, const Accumulator& acc, ModelGradient& g) {
  Matrix gQ = acc.g_Q + acc.g_Q_lower.selfadjointView<Eigen::Lower>().toDenseMatrix();
  gQ = 0.5 * (gQ + gQ.transpose());
  const Matrix& Linv = post.Linv;
  // Q = Linv^T Linv - B^T B, B = L_v^T Linv, alpha = Linv^T m_v.
  Matrix gB = -2.0 * post.B * gQ;
  if (acc.g_B.size()) gB += acc.g_B;
  Matrix gLinv = model.q_mean * acc.g_alpha.transpose() + 2.0 * Linv * gQ;
  gLinv.noalias() += model.q_chol * gB;
  g.q_mean += Linv * acc.g_alpha;
  g.q_chol += (Linv * gB.transpose()).triangularView<Eigen::Lower>().toDenseMatrix();
  g.mean += acc.g_mean;
  g.log_noise += acc.g_log_noise;
  g.kernel += acc.g_kernel;
  g.inducing += acc.g_inducing;

  // Linv = L^{-1}: dL = -Linv^T dLinv Linv^T; then the Cholesky of K_WW + eps I.
  const Matrix gL = (-(Linv.transpose() * gLinv * Linv.transpose())).triangularView<Eigen::Lower>();
  const Matrix gK = cholesky_backward(post.L, Linv, gL);
  double g_kdiag = acc.g_kdiag + post.jitter_used * gK.trace();  // eps = jitter * k(x,x)
  model.kernel.diag_backward(g_kdiag, g.kernel);
  KernelCache cache;
  Matrix Kww;
  model.kernel.cross(model.inducing, model.inducing, Kww, &cache);
  Matrix gW = Matrix::Zero(model.num_inputs(), model.num_inducing());
  model.kernel.cross_backward(model.inducing, model.inducing, gK, cache, g.kernel,
                              model.spec.learn_inducing ? &gW : nullptr);
  g.inducing += 2.0 * gW;  // W appears on both sides of K_WW and gK is symmetric
}

}  // namespace

ObjectiveValue elbo(const Model& model, const Dataset& data, const std::vector<Index>& bags, double scale, Vector* grad,
                    const ObjectiveOptions& options) {
  model.spec.validate();
  if (data.num_inputs() != model.num_inputs())
    throw DataError("the data have " + std::to_string(data.num_inputs()) + " inputs but the model expects " +
                    std::to_string(model.num_inputs()));
  const Posterior post = compute_posterior(model);
  const BagNeeds needs = bag_needs(model.spec);
  const bool with_grad = grad != nullptr;
  const Index M = model.num_inducing(), D = model.num_inputs(), P = model.kernel.num_params();
  const int slots = std::max({1, options.slots, options.threads});

  std::vector<Accumulator> acc;
  acc.reserve(slots);
  for (int s = 0; s < slots; ++s)
    acc.emplace_back(with_grad ? M : 0, with_grad ? D : 0, P, with_grad && needs == BagNeeds::nystrom);

  // Slot s handles bags s, s + slots, ... in order; slots are spread over threads.
  std::vector<std::exception_ptr> errors(slots);
  std::vector<Workspace> workspaces(slots);
#pragma omp parallel for schedule(static, 1) num_threads(std::max(1, options.threads))
  for (int s = 0; s < slots; ++s) {
    try {
      for (size_t k = s; k < bags.size(); k += slots)
        process_bag(model, post, data, bags[k], scale, needs, with_grad, options, workspaces[s], acc[s]);
    } catch (...) {
      errors[s] = std::current_exception();
    }
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  for (int s = 1; s < slots; ++s) acc[0].add(acc[s]);

  ObjectiveValue out;
  out.data_term = acc[0].value;
  out.jitter_used = post.jitter_used;
  ModelGradient g(model);
  if (with_grad) finish_gradient(model, post, acc[0], g);
  ModelGradient gkl(model);
  out.kl = kl_divergence(model, with_grad ? &gkl : nullptr);
  out.elbo = scale * out.data_term - out.kl;
  if (with_grad) {
    Vector gv = g.pack(model);
    gv -= gkl.pack(model);
    *grad = std::move(gv);
  }
  return out;
}

ObjectiveValue elbo(const Model& model, const Dataset& data, Vector* grad, const ObjectiveOptions& options) {
  std::vector<Index> all(data.num_bags());
  for (Index a = 0; a < data.num_bags(); ++a) all[a] = a;
  return elbo(model, data, all, 1.0, grad, options);
}

}  // namespace vbagg
