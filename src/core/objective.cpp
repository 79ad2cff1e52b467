#include "objective.hpp"

#include <omp.h>

#include <algorithm>
#include <map>

#include "likelihood.hpp"
#include "likelihoods/count.hpp"
#include "linalg.hpp"
#include "param_layout.hpp"
#include "shard.hpp"

namespace vbagg {

namespace {

// The M x n buffers a kernel evaluation keeps for its backward pass: each part's distances, and
// each factor of a product term's values.
Index kernel_buffers(const Model& model) {
  Index n = 0;
  for (Index q = 0; q < model.num_latents(); ++q) {
    const Kernel& k = model.kernel_of(q);
    n += static_cast<Index>(k.parts().size());
    for (const auto& term : k.terms())
      if (term.size() > 1) n += static_cast<Index>(term.size());
  }
  return n;
}

// Gradient accumulators of one slot, with respect to the per-evaluation quantities of Posterior:
// alpha, Q, B, mu, k(x,x), the kernel (through K_Wa and K_aa), the noise and W.
struct Accumulator {
  double value = 0;
  Vector g_alpha;
  Matrix g_Q_lower;  // rank updates, lower triangle only
  Matrix g_Q;        // general updates
  Matrix g_P_lower;  // residual mode: rank updates with respect to P (the prior part of Q)
  Matrix g_B;
  double g_mean = 0, g_kdiag = 0;
  Vector g_linear, g_likelihood;
  Vector g_kernel;
  Matrix g_inducing;
  Vector g_unit;  // log sigma_u of the unit effect

  // Mq entries of q (M inducing values, then the fixed effects), D inputs, P kernel parameters;
  // `needs` lists what the sources' bag terms read.
  // Zeroed, in the shapes the evaluation needs. The storage is kept from the last evaluation
  // (accumulator_pool): allocating and faulting in fresh M x M matrices every step cost more than
  // zeroing warm ones.
  void reset(Index Mq, Index D, Index M, Index P, Index linear, Index likelihood_params, Index unit_params,
             const std::vector<BagNeeds>& needs) {
    auto any = [&](BagNeeds n) { return std::find(needs.begin(), needs.end(), n) != needs.end(); };
    auto zero_or_free = [](Matrix& m, bool used, Index n) {
      if (used)
        m.setZero(n, n);
      else
        m.resize(0, 0);
    };
    value = 0;
    g_mean = g_kdiag = 0;
    g_linear.setZero(linear);
    g_unit.setZero(unit_params);
    g_alpha.setZero(Mq);
    g_Q_lower.setZero(Mq, Mq);
    zero_or_free(g_Q, any(BagNeeds::exact), Mq);
    zero_or_free(g_B, any(BagNeeds::nystrom) || any(BagNeeds::residual), Mq);
    zero_or_free(g_P_lower, any(BagNeeds::residual), Mq);
    g_kernel.setZero(P);
    g_likelihood.setZero(likelihood_params);
    g_inducing.setZero(D, M);
  }
  // Adds o's scalars and vectors and its D x M inducing gradient.
  void add_small(const Accumulator& o) {
    value += o.value;
    g_alpha += o.g_alpha;
    g_mean += o.g_mean;
    g_kdiag += o.g_kdiag;
    g_linear += o.g_linear;
    g_likelihood += o.g_likelihood;
    g_kernel += o.g_kernel;
    g_inducing += o.g_inducing;
    g_unit += o.g_unit;
  }
  // Adds columns [j, j + w) of o's M x M matrices.
  void add_columns(const Accumulator& o, Index j, Index w) {
    g_Q_lower.middleCols(j, w) += o.g_Q_lower.middleCols(j, w);
    if (g_Q.size()) g_Q.middleCols(j, w) += o.g_Q.middleCols(j, w);
    if (g_B.size()) g_B.middleCols(j, w) += o.g_B.middleCols(j, w);
    if (g_P_lower.size()) g_P_lower.middleCols(j, w) += o.g_P_lower.middleCols(j, w);
  }
};

// The accumulators of the evaluations run from this thread, kept between them.
std::vector<Accumulator>& accumulator_pool() {
  static thread_local std::vector<Accumulator> pool;
  return pool;
}

struct SourceTerm {
  ModelSpec spec;
  const Posterior* post = nullptr;  // of the source's task
  const Vector* params = nullptr;
  double unit_log_sd = 0;
  Index likelihood_offset = 0, unit_offset = 0;
  BagNeeds needs = BagNeeds::marginals;
};

// Scratch of one pixel block, kept between the forward and backward pass of a bag.
struct BlockScratch {
  Buffer K;             // k(W, X_block), M x len
  Buffer R;             // Q K; the backward pass turns it into dL/dK
  Buffer S;             // residual mode: P K, for the residual d = k - diag(K^T P K)
  FeatureCache kernel;  // distances for the kernel backward
};

// One bag's forward pass, kept for its term and its way back: m, s2 (and T, C or d), and its pixel
// blocks' K and R (and S) in `store` while they are kept.
struct BagForward {
  Index bag = 0, begin = 0, n = 0, block = 0, blocks = 0;
  bool keep = false;        // every block's scratch stays in *store for the way back
  bool one_scratch = true;  // one scratch serves every block (nothing kept)
  Vector w, m, s2, d;
  Matrix T, C;
  KernelCache aa_cache;
  std::vector<BlockScratch>* store = nullptr;
  BlockScratch& scratch(Index b) const { return (*store)[one_scratch ? 0 : static_cast<size_t>(b)]; }
  Index len_of(Index b) const { return std::min(block, n - b * block); }
};

// Per-thread scratch, reused from bag to bag so the large buffers are allocated once per thread.
struct Workspace {
  std::vector<BlockScratch> blocks;
  BagForward bag;
  Buffer U;
};

// The forward passes of bags sharing their unit's effect, kept from their moments to their way
// back (elbo), and reused from call to call so their buffers are allocated once.
struct KeptForwards {
  std::vector<BagForward> bags;
  std::vector<std::vector<BlockScratch>> blocks;
  std::vector<double> bytes;  // what each one's buffers hold (they only grow)
  double total = 0;           // their sum, held within ObjectiveOptions::cache_mb
};

KeptForwards& kept_forwards() {
  static thread_local KeptForwards pool;
  return pool;
}

// The features (K: kernel rows, then the fixed effects' rows) and R of pixels [begin, begin + len)
// of the data.
void forward_block(const Model& model, const Posterior& post, const Dataset& data, Index begin, Index len,
                   BagNeeds needs, BlockScratch& b) {
  const Index Mq = model.num_q();
  auto K = b.K.shape(Mq, len);
  features_into(model, data.inputs.middleCols(begin, len), K, b.kernel);
  b.R.shape(Mq, len).noalias() = post.Q * K;
  if (needs == BagNeeds::residual) b.S.shape(Mq, len).noalias() = post.P * K;
}

// lower(G) -= K diag(g) K^T, as two symmetric rank updates split by the sign of g (U is scratch).
void subtract_weighted_gram(Matrix& G, const Eigen::Map<Matrix>& K, const Eigen::Ref<const Vector>& g, Buffer& U) {
  const Vector pos = g.cwiseMax(0.0).cwiseSqrt(), neg = (-g).cwiseMax(0.0).cwiseSqrt();
  for (const auto& [root, sign] : {std::pair<const Vector&, double>{pos, -1.0}, {neg, 1.0}}) {
    if (!root.any()) continue;
    auto W = U.shape(K.rows(), K.cols());
    W.noalias() = K * root.asDiagonal();
    G.selfadjointView<Eigen::Lower>().rankUpdate(W, sign);
  }
}

// T V and T^T E of one bag, T = B K, from its blocks' features: kept from the forward pass, or
// recomputed block by block when the bag is too large to keep them.
class BlockProducts : public NystromProducts {
 public:
  BlockProducts(const Model& model, const Posterior& post, const Dataset& data, Index begin, Index n, Index block,
                bool kept, std::vector<BlockScratch>& blocks)
      : model_(model), post_(post), data_(data), begin_(begin), n_(n), block_(block), kept_(kept), blocks_(blocks) {}

  Index rows() const override { return model_.num_q(); }
  Matrix times(const Matrix& V) const override {
    Matrix KV = Matrix::Zero(model_.num_q(), V.cols());
    for (Index off = 0; off < n_; off += block_) KV.noalias() += K(off) * V.middleRows(off, len(off));
    return post_.B * KV;
  }
  Matrix transpose_times(const Matrix& E) const override {
    const Matrix BtE = post_.B.transpose() * E;
    Matrix out(n_, E.cols());
    for (Index off = 0; off < n_; off += block_) out.middleRows(off, len(off)).noalias() = K(off).transpose() * BtE;
    return out;
  }

 private:
  Index len(Index off) const { return std::min(block_, n_ - off); }
  Eigen::Map<const Matrix> K(Index off) const {
    BlockScratch& b = blocks_[kept_ ? static_cast<size_t>(off / block_) : 0];
    if (!kept_) {
      auto K = b.K.shape(model_.num_q(), len(off));
      features_into(model_, data_.inputs.middleCols(begin_ + off, len(off)), K, b.kernel);
    }
    const BlockScratch& c = b;
    return c.K.view();
  }
  const Model& model_;
  const Posterior& post_;
  const Dataset& data_;
  Index begin_, n_, block_;
  bool kept_;
  std::vector<BlockScratch>& blocks_;
};

// Pixels per block of a bag: the exact covariance couples every pair of pixels, so that mode
// takes the bag as one block.
Index block_of(BagNeeds needs, Index n, const ObjectiveOptions& opt) {
  return needs == BagNeeds::exact ? n : std::max<Index>(1, opt.block);
}

// The bytes a bag's kept blocks take (K, R, S and the kernel's buffers) and its T: each block's
// buffers are sized to its pixels, and after a bag of full blocks they hold that many.
double kept_bytes(const Model& model, BagNeeds needs, Index n, const ObjectiveOptions& opt) {
  const Index block = block_of(needs, n, opt), blocks = (n + block - 1) / block;
  const double per_pixel = static_cast<double>(model.num_q()) * 8.0 *
                           ((needs == BagNeeds::residual ? 3.0 : 2.0) + static_cast<double>(kernel_buffers(model)) +
                            (needs == BagNeeds::nystrom ? 1.0 : 0.0));
  return per_pixel * static_cast<double>(blocks == 1 ? n : blocks * block);
}

// Bag a's forward pass in blocks of pixels. The blocks' K and R are kept for the backward pass
// while they fit in the cache budget (or when `kept` says the caller has made room for them) and
// recomputed otherwise, so memory stays bounded whatever the bag size.
void bag_forward(const Model& model, const Posterior& post, const Dataset& data, Index a, const SourceTerm& src,
                 bool with_grad, bool kept, const ObjectiveOptions& opt, std::vector<BlockScratch>& store,
                 BagForward& f) {
  const BagNeeds needs = src.needs;
  f.bag = a;
  f.begin = data.bag_begin(a);
  f.n = data.bag_size(a);
  f.block = block_of(needs, f.n, opt);
  f.blocks = (f.n + f.block - 1) / f.block;
  f.keep = kept || f.blocks == 1 || kept_bytes(model, needs, f.n, opt) <= opt.cache_mb * 1048576.0;
  // Without a gradient nothing is kept for a backward pass, and one scratch serves every block,
  // unless a residual-form term reads the blocks' features again for its products with T.
  f.one_scratch = !f.keep || (!with_grad && needs != BagNeeds::residual);
  f.store = &store;
  const Index scratches = f.one_scratch ? 1 : f.blocks;
  if (static_cast<Index>(store.size()) < scratches) store.resize(static_cast<size_t>(scratches));

  const Index begin = f.begin, n = f.n;
  f.w = data.coverage.segment(begin, n).cwiseProduct(data.population.segment(begin, n));
  f.m.resize(n);
  f.s2.resize(n);
  f.d.resize(needs == BagNeeds::residual ? n : 0);
  f.T.resize(needs == BagNeeds::nystrom ? model.num_q() : 0, needs == BagNeeds::nystrom ? n : 0);
  f.C.resize(0, 0);
  for (Index b = 0; b < f.blocks; ++b) {
    BlockScratch& sb = f.scratch(b);
    const Index off = b * f.block, len = f.len_of(b);
    forward_block(model, post, data, begin + off, len, needs, sb);
    const auto K = sb.K.view(), R = sb.R.view();
    f.m.segment(off, len).noalias() = K.transpose() * post.alpha;
    if (model.spec.map_estimate)
      f.s2.segment(off, len).setZero();  // the likelihood is evaluated at f = m
    else
      f.s2.segment(off, len) =
          (post.kdiag - K.cwiseProduct(R).colwise().sum().array()).cwiseMax(0.0).matrix().transpose();
    if (needs == BagNeeds::nystrom) {
      if (model.spec.map_estimate)
        f.T.middleCols(off, len).setZero();  // a point mass has no covariance
      else
        f.T.middleCols(off, len).noalias() = post.B * K;
    }
    if (needs == BagNeeds::residual) {
      if (model.spec.map_estimate)
        f.d.segment(off, len).setZero();
      else
        f.d.segment(off, len) =
            (post.kdiag - K.cwiseProduct(sb.S.view()).colwise().sum().array()).cwiseMax(0.0).matrix().transpose();
    }
  }
  f.m.array() += model.mean_of(src.spec.task);
  const Index linear = model.spec.num_linear_point();
  if (linear > 0)
    f.m.noalias() += data.inputs.middleCols(begin, n).topRows(linear).transpose() * model.linear_of(src.spec.task);
  if (needs == BagNeeds::exact) {
    const auto Xa = data.inputs.middleCols(begin, n);
    f.C.resize(n, n);
    f.aa_cache = KernelCache();
    model.kernel.cross_into(Xa, Xa, f.C, f.aa_cache);
    f.C.noalias() -= store[0].K.view().transpose() * store[0].R.view();
  }
}

// The bag's term l_a from its forward pass, and its derivatives into g when given.
double bag_term_of(const Model& model, const Posterior& post, const Dataset& data, const BagForward& f,
                   const SourceTerm& src, const ObjectiveOptions& opt, const SharedUnitPass& shared, BagGradient* g) {
  BagPosterior bag(f.m, f.s2, f.w, data.response[f.bag], data.trials_of(f.bag));
  if (f.T.size()) bag.T = &f.T;
  if (f.C.size()) bag.C = &f.C;
  const BlockProducts products(model, post, data, f.begin, f.n, f.block, f.blocks == 1 || !f.one_scratch, *f.store);
  if (src.needs == BagNeeds::residual) {
    bag.d = &f.d;
    bag.t = &products;
  }
  bag.has_unit_effect = src.spec.unit_effect;
  bag.unit_log_sd = src.unit_log_sd;
  bag.shared_unit = shared;
  bag.draws = {opt.draw_seed, opt.draw_step, static_cast<unsigned long long>(data.global_bag_of(f.bag)),
               model.spec.samples};
  return bag_term(src.spec, *src.params, bag, g);
}

// The bag's way back from its term's derivatives g into acc, through its blocks (kept from the
// forward pass, or recomputed).
void bag_backward(const Model& model, const Posterior& post, const Dataset& data, BagForward& f, double scale,
                  const SourceTerm& src, BagGradient& g, Workspace& ws, Accumulator& acc) {
  const BagNeeds needs = src.needs;
  const Index begin = f.begin, n = f.n, M = model.num_inducing();
  if (src.spec.unit_effect) acc.g_unit[src.unit_offset] += scale * g.g_unit_log_sd;
  g.gm *= scale;
  g.gs2 *= model.spec.map_estimate ? 0.0 : scale;  // s2 = 0 does not depend on the parameters
  if (g.g_params.size()) acc.g_likelihood.segment(src.likelihood_offset, g.g_params.size()) += scale * g.g_params;
  acc.g_mean += g.gm.sum();
  const Index linear = model.spec.num_linear_point();
  if (linear > 0)
    acc.g_linear.segment(src.spec.task * linear, linear).noalias() +=
        data.inputs.middleCols(begin, n).topRows(linear) * g.gm;
  acc.g_kdiag += g.gs2.sum();
  if (needs == BagNeeds::nystrom) g.gT *= scale;
  std::vector<std::pair<Matrix, Matrix>> factors;  // (B^T U, V) and (U, V) of dl/dT = sum U V^T
  if (needs == BagNeeds::residual) {
    g.gd *= model.spec.map_estimate ? 0.0 : scale;
    acc.g_kdiag += g.gd.sum();
    for (auto& [U, V] : g.gT_factors) {
      U *= scale;
      factors.push_back({post.B.transpose() * U, V});
    }
  }
  Matrix gCsym;
  if (needs == BagNeeds::exact) {
    g.gC *= scale;
    gCsym = 0.5 * (g.gC + g.gC.transpose());
    model.kernel.cross_backward(gCsym, f.aa_cache, acc.g_kernel, nullptr);
  }
  for (Index b = 0; b < f.blocks; ++b) {
    BlockScratch& sb = f.scratch(b);
    const Index off = b * f.block, len = f.len_of(b);
    if (!f.keep) forward_block(model, post, data, begin + off, len, needs, sb);
    const auto K = sb.K.view();
    auto dK = sb.R.view();  // R, then dL/dK in place
    const auto gm = g.gm.segment(off, len);
    const auto gs2 = g.gs2.segment(off, len);
    acc.g_alpha.noalias() += K * gm;
    // s2 = k - diag(K^T Q K): dQ = -K diag(gs2) K^T.
    subtract_weighted_gram(acc.g_Q_lower, K, gs2, ws.U);
    if (needs == BagNeeds::exact) {
      acc.g_Q.noalias() -= (K * gCsym) * K.transpose();
      // dL/dK from C = ... - K^T R, before R is overwritten.
      ws.U.shape(model.num_q(), len).noalias() = -2.0 * dK * gCsym;
    }
    // dL/dK from m and s2 (and T or C).
    for (Index j = 0; j < len; ++j) dK.col(j) = post.alpha * gm[j] - (2.0 * gs2[j]) * dK.col(j);
    if (needs == BagNeeds::nystrom) {
      acc.g_B.noalias() += g.gT.middleCols(off, len) * K.transpose();
      dK.noalias() += post.B.transpose() * g.gT.middleCols(off, len);
    }
    if (needs == BagNeeds::exact) dK += ws.U.view();
    if (needs == BagNeeds::residual) {
      // d = k - diag(K^T P K): dP = -K diag(gd) K^T, dK = -2 P K diag(gd).
      const auto gd = g.gd.segment(off, len);
      subtract_weighted_gram(acc.g_P_lower, K, gd, ws.U);
      const auto S = sb.S.view();
      for (Index j = 0; j < len; ++j) dK.col(j) -= (2.0 * gd[j]) * S.col(j);
      // T = B K through its products: dB += U (K V)^T, dK += (B^T U) V^T.
      for (size_t k = 0; k < factors.size(); ++k) {
        const auto V = g.gT_factors[k].second.middleRows(off, len);
        acc.g_B.noalias() += g.gT_factors[k].first * (K * V).transpose();
        dK.noalias() += factors[k].first * V.transpose();
      }
    }
    // The fixed effects' rows of the features are data: only the kernel rows pass on.
    features_backward(model, dK.topRows(M), sb.kernel, acc.g_kernel,
                      model.spec.learn_inducing ? &acc.g_inducing : nullptr);
  }
}

// One bag: forward, term, and way back. A bag sharing its unit's effect takes two calls, one with
// each half of `shared` (its moments; then the way back), and recomputes its forward pass.
void process_bag(const Model& model, const Posterior& post, const Dataset& data, Index a, double scale,
                 const SourceTerm& src, bool with_grad, const ObjectiveOptions& opt, const SharedUnitPass& shared,
                 Workspace& ws, Accumulator& acc) {
  BagForward& f = ws.bag;
  bag_forward(model, post, data, a, src, with_grad, false, opt, ws.blocks, f);
  BagGradient g;
  acc.value += bag_term_of(model, post, data, f, src, opt, shared, with_grad ? &g : nullptr);
  if (with_grad) bag_backward(model, post, data, f, scale, src, g, ws, acc);
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

// From one task's accumulated gradients with respect to (alpha, Q, B) of its posterior to (m_v,
// L_v), its intercept and mixing weights, and dL/dLinv (the unscaled, shared L^{-1}) and dL/dk_q(x,x)
// per latent, which finish_gradient takes through the Cholesky of K_WW.
void task_gradient(const Model& model, const Posterior& post, const Accumulator& acc, ModelGradient& g,
                   ObjectiveValue* moments, Matrix& gLinv, Vector& g_latent_kdiag, int threads) {
  Matrix gQ = acc.g_Q_lower.selfadjointView<Eigen::Lower>();
  if (acc.g_Q.size()) gQ += 0.5 * (acc.g_Q + acc.g_Q.transpose());
  const Matrix& Lambda = post.Lambda;  // lower triangular, as L_v
  const Index M = model.num_inducing(), Mq = model.num_q(), d = post.task;
  const auto Lv = model.q_chol.triangularView<Eigen::Lower>();
  if (moments) {
    moments->grad_q_mean += Lambda * acc.g_alpha;
    Matrix gS = -(Lambda * gQ * Lambda.transpose());
    if (acc.g_B.size())
      gS += 0.5 * model.q_chol.triangularView<Eigen::Lower>().transpose().solve(acc.g_B * Lambda.transpose());
    moments->grad_q_cov += 0.5 * (gS + gS.transpose());
  }
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

  // The bags are shared over the slots by their pixels, largest first to the least loaded slot
  // (so the largest lands in slot 0); slots are spread over threads, and each thread keeps one
  // workspace for all its slots. A slot's bags depend on the bag list only, never on the threads.
  std::vector<Index> pixels(bags.size());
  for (size_t k = 0; k < bags.size(); ++k) pixels[k] = data.bag_size(bags[k]);
  const std::vector<int> slot_of = assign_bags(pixels, slots);
  std::vector<std::exception_ptr> errors(slots);
  std::vector<Workspace> workspaces(threads);
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
  // A shared bag's forward pass is kept from its moments to its way back while the kept buffers,
  // which stay from call to call, fit cache_mb in all (bags taken in list order), so it runs once;
  // the others run it again on the way back. Either way the numbers are the same.
  std::vector<int> kept_at(bags.size(), -1);
  KeptForwards& kept = kept_forwards();
  if (with_grad && !units.empty()) {
    const double budget = options.cache_mb * 1048576.0;
    size_t count = 0;
    for (size_t k = 0; k < bags.size(); ++k) {
      if (unit_of[k] < 0) continue;
      const double need = kept_bytes(model, source_of(k).needs, data.bag_size(bags[k]), options);
      const double held = count < kept.bytes.size() ? kept.bytes[count] : 0.0;
      if (need > held && kept.total + (need - held) > budget) continue;
      if (count == kept.bytes.size()) {
        kept.bytes.push_back(0);
        kept.bags.emplace_back();
        kept.blocks.emplace_back();
      }
      if (need > held) {
        kept.total += need - held;
        kept.bytes[count] = need;
      }
      kept_at[k] = static_cast<int>(count++);
    }
  }
  // pass 0: every bag, the shared ones' moments only; pass 1: the shared ones' way back. Slots are
  // taken dynamically in order: a slot's bags and its accumulator do not depend on which thread
  // runs it, and the largest bags start first, so minibatches of a few bags of very different
  // sizes stay balanced.
  auto run_slots = [&](int pass) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int s = 0; s < slots; ++s) {
      if (failure) continue;  // the bags cannot be evaluated: only the reduction is left
      try {
        Workspace& ws = workspaces[omp_get_thread_num()];
        for (size_t k = 0; k < bags.size(); ++k) {
          if (slot_of[k] != s || (pass == 1 && unit_of[k] < 0)) continue;
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
            bag_backward(model, *src.post, data, f, scale, src, g, ws, into);
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
  if (!units.empty() && !failure) {
    std::vector<std::exception_ptr> unit_errors(units.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (size_t u = 0; u < units.size(); ++u) {
      try {
        const SourceTerm& src = source_of(units[u][0]);
        std::vector<double> y;
        std::vector<CountMoments> mo;
        for (size_t k : units[u]) {
          y.push_back(data.response[bags[k]]);
          mo.push_back(unit_moments[k]);
        }
        UnitTerm& t = unit_terms[u];
        t.value = shared_unit_effect_score(dynamic_cast<const CountLikelihood&>(likelihood_of(src.spec.likelihood)), y,
                                           mo, *src.params, src.unit_log_sd, with_grad ? &t.d : nullptr,
                                           with_grad ? &t.g_params : nullptr, with_grad ? &t.g_log_sd : nullptr);
      } catch (...) {
        unit_errors[u] = std::current_exception();
      }
    }
    for (auto& e : unit_errors)
      if (e && !failure) failure = e;
    if (with_grad && !failure) run_slots(1);
  }
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
  if (with_grad && !failure) {
    Matrix gLinv = Matrix::Zero(M, M);
    Vector g_latent_kdiag = Vector::Zero(model.num_latents());
    for (Index d = 0; d < tasks; ++d)
      task_gradient(model, posts[static_cast<size_t>(d)], acc[static_cast<size_t>(d)], g, moments ? &out : nullptr,
                    gLinv, g_latent_kdiag, threads);
    finish_gradient(model, posts[0], gLinv, g_latent_kdiag, g, threads);
  }
  Vector g_data = with_grad ? g.pack(model) : Vector();
  if (processes.size() > 1) sum_over_processes(processes, failure, out, g_data);
  ModelGradient gkl(model);
  out.kl = kl_divergence(model, with_grad ? &gkl : nullptr);
  out.elbo = scale * out.data_term - out.kl;
  if (with_grad) {
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
