#include "bag_pass.hpp"

#include <cmath>
#include <limits>

#include "feature_store.hpp"
#include "likelihood.hpp"
#include "products.hpp"

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

// Block b's picks: runs [first_pick[b], first_pick[b + 1]) of the bag.
struct BlockPicks {
  Index first = 0, count = 0;
};

BlockPicks picks_of(const BagForward& f, Index b) {
  if (f.first_pick.empty()) return {};
  const Index first = f.first_pick[static_cast<size_t>(b)];
  return {first, f.first_pick[static_cast<size_t>(b) + 1] - first};
}

// K's columns at the block's picks: K itself when every pixel is picked, else Kp (gathered by
// forward_block).
Eigen::Map<const Matrix> picked_columns(const BagForward& f, const BlockScratch& sb) {
  return f.runs.c == 0 ? sb.K.view() : sb.Kp.view();
}

// Block b's features (K: kernel rows, then the fixed effects' rows) and R = Q K, and in residual
// mode S = P K at its picks. Without the marginal variance R is only shaped: the backward pass
// writes dL/dK there.
void forward_block(const Model& model, const Posterior& post, const Dataset& data, const BagForward& f, Index b,
                   const SourceTerm& src, BlockScratch& sb) {
  const BagNeeds needs = src.needs;
  const Index Mq = model.num_q(), len = f.len_of(b);
  auto K = sb.K.shape(Mq, len);
  const Index first = f.begin + b * f.block;
  if (f.features && f.features->reading()) {
    f.features->get(first, K);
  } else {
    features_into(model, data.inputs.middleCols(first, len), K, sb.kernel);
    if (f.features && f.features->filling()) f.features->put(first, K);
  }
  auto R = sb.R.shape(Mq, len);
  if (src.marginal_variance()) gemm(1.0, post.Q, false, K, false, 0.0, R);
  if (needs == BagNeeds::residual) {
    const BlockPicks p = picks_of(f, b);
    if (f.runs.c > 0) {
      auto Kp = sb.Kp.shape(Mq, p.count);
      for (Index t = 0; t < p.count; ++t) Kp.col(t) = K.col(f.runs.pick(p.first + t) - b * f.block);
    }
    auto S = sb.S.shape(Mq, p.count);  // shaped even for a block without picks, whose products are empty
    if (p.count > 0) gemm(1.0, post.P, false, picked_columns(f, sb), false, 0.0, S);
  }
}

// lower(G) -= K diag(g) K^T, as two symmetric rank updates split by the sign of g (U is scratch).
// Each takes only its sign's columns, so together they cost one update over the block: the
// sampled expectation's and the delta method's d l / d d change sign from pixel to pixel.
template <class Features>
void subtract_weighted_gram(Matrix& G, const Features& K, const Eigen::Ref<const Vector>& g, Buffer& U) {
  for (const double sign : {1.0, -1.0}) {
    const Index count = (sign * g.array() > 0).count();
    if (count == 0) continue;
    auto W = U.shape(K.rows(), count);
    for (Index j = 0, c = 0; j < g.size(); ++j)
      if (sign * g[j] > 0) W.col(c++) = K.col(j) * std::sqrt(sign * g[j]);
    rank_update_lower(-sign, W, G);
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

}  // namespace

KeptForwards& kept_forwards() {
  static thread_local KeptForwards pool;
  return pool;
}

int KeptForwards::take(size_t& next, double need, double budget) {
  const double held = next < bytes.size() ? bytes[next] : 0.0;
  if (need > held && total + (need - held) > budget) return -1;
  if (next == bytes.size()) {
    bytes.push_back(0);
    bags.emplace_back();
    blocks.emplace_back();
  }
  if (need > held) {
    total += need - held;
    bytes[next] = need;
  }
  return static_cast<int>(next++);
}

Index residual_cap_of(const ModelSpec& source_spec, BagNeeds needs) {
  return needs == BagNeeds::residual && source_spec.expectation != Expectation::sample ? source_spec.residual_pixels
                                                                                       : 0;
}

double kept_bytes(const Model& model, BagNeeds needs, Index residual_cap, Index n, const ObjectiveOptions& opt) {
  const Index block = block_of(needs, n, opt), blocks = (n + block - 1) / block;
  const double pixels = static_cast<double>(blocks == 1 ? n : blocks * block);
  const double per_pixel =
      static_cast<double>(model.num_q()) * 8.0 *
      (2.0 + static_cast<double>(kernel_buffers(model)) + (needs == BagNeeds::nystrom ? 1.0 : 0.0));
  // S at the picks, and with runs the picked columns of K beside it.
  double picked = 0;
  if (needs == BagNeeds::residual)
    picked = residual_cap > 0 && n > residual_cap ? 2.0 * static_cast<double>(residual_cap) : pixels;
  return per_pixel * pixels + static_cast<double>(model.num_q()) * 8.0 * picked;
}

void bag_forward(const Model& model, const Posterior& post, const Dataset& data, Index a, const SourceTerm& src,
                 bool with_grad, bool kept, const ObjectiveOptions& opt, std::vector<BlockScratch>& store,
                 BagForward& f) {
  const BagNeeds needs = src.needs;
  f.bag = a;
  f.begin = data.bag_begin(a);
  f.n = data.bag_size(a);
  f.block = block_of(needs, f.n, opt);
  f.blocks = (f.n + f.block - 1) / f.block;
  f.keep = kept || f.blocks == 1 || kept_bytes(model, needs, src.residual_cap, f.n, opt) <= opt.cache_mb * 1048576.0;
  // Without a gradient nothing is kept for a backward pass, and one scratch serves every block,
  // unless a residual-form term reads the blocks' features again for its products with T.
  f.one_scratch = !f.keep || (!with_grad && needs != BagNeeds::residual);
  f.store = &store;
  f.features = opt.q_moments_only ? opt.features : nullptr;
  const Index scratches = f.one_scratch ? 1 : f.blocks;
  if (static_cast<Index>(store.size()) < scratches) store.resize(static_cast<size_t>(scratches));

  const Index begin = f.begin, n = f.n;
  f.w = data.coverage.segment(begin, n).cwiseProduct(data.population.segment(begin, n));
  f.m.resize(n);
  f.s2.resize(n);
  f.d.resize(needs == BagNeeds::residual ? n : 0);
  f.runs = {n, needs == BagNeeds::residual && src.residual_cap > 0 && n > src.residual_cap ? src.residual_cap : 0};
  f.first_pick.clear();
  if (needs == BagNeeds::residual) {
    f.d_pick.resize(f.runs.count());
    for (Index b = 0, k = 0; b <= f.blocks; ++b) {
      while (k < f.runs.count() && f.runs.pick(k) < std::min(b * f.block, n)) ++k;
      f.first_pick.push_back(b == f.blocks ? f.runs.count() : k);
    }
  }
  f.T.resize(needs == BagNeeds::nystrom ? model.num_q() : 0, needs == BagNeeds::nystrom ? n : 0);
  f.C.resize(0, 0);
  for (Index b = 0; b < f.blocks; ++b) {
    BlockScratch& sb = f.scratch(b);
    const Index off = b * f.block, len = f.len_of(b);
    forward_block(model, post, data, f, b, src, sb);
    const auto K = sb.K.view(), R = sb.R.view();
    f.m.segment(off, len).noalias() = K.transpose() * post.alpha;
    if (model.spec.map_estimate)
      f.s2.segment(off, len).setZero();  // the likelihood is evaluated at f = m
    else if (!src.marginal_variance())
      f.s2.segment(off, len).setConstant(std::numeric_limits<double>::quiet_NaN());  // not computed, not read
    else
      f.s2.segment(off, len) =
          (post.kdiag - K.cwiseProduct(R).colwise().sum().array()).cwiseMax(0.0).matrix().transpose();
    if (needs == BagNeeds::nystrom) {
      if (model.spec.map_estimate)
        f.T.middleCols(off, len).setZero();  // a point mass has no covariance
      else
        gemm(1.0, post.B, false, K, false, 0.0, f.T.middleCols(off, len));
    }
    if (needs == BagNeeds::residual) {
      const BlockPicks p = picks_of(f, b);
      if (model.spec.map_estimate)
        f.d_pick.segment(p.first, p.count).setZero();
      else
        f.d_pick.segment(p.first, p.count) =
            (post.kdiag - picked_columns(f, sb).cwiseProduct(sb.S.view()).colwise().sum().array())
                .cwiseMax(0.0)
                .matrix()
                .transpose();
    }
  }
  // Each run takes its pick's residual (every pixel is its own pick without runs).
  if (needs == BagNeeds::residual && f.runs.c == 0) f.d = f.d_pick;
  for (Index k = 0; needs == BagNeeds::residual && k < f.runs.c; ++k)
    f.d.segment(f.runs.begin(k), f.runs.begin(k + 1) - f.runs.begin(k)).setConstant(f.d_pick[k]);
  f.m.array() += model.mean_of(src.spec.task);
  const Index linear = model.spec.num_linear_point();
  if (linear > 0)
    f.m.noalias() += data.inputs.middleCols(begin, n).topRows(linear).transpose() * model.linear_of(src.spec.task);
  if (needs == BagNeeds::exact) {
    const auto Xa = data.inputs.middleCols(begin, n);
    f.C.resize(n, n);
    f.aa_cache = KernelCache();
    model.kernel.cross_into(Xa, Xa, f.C, f.aa_cache);
    gemm(-1.0, store[0].K.view(), true, store[0].R.view(), false, 1.0, f.C);
  }
}

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

void bag_backward(const Model& model, const Posterior& post, const Dataset& data, BagForward& f, double scale,
                  const SourceTerm& src, const ObjectiveOptions& opt, BagGradient& g, Workspace& ws, Accumulator& acc) {
  const BagNeeds needs = src.needs;
  const bool q_only = opt.q_moments_only;
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
  // Residual mode: m = K^T alpha and T = B K enter through products with K, taken together per
  // block so K is read once for alpha's and B's gradients and dK written once for both parts:
  // right = [gm, V_1, ...] and left = [alpha, B^T U_1, ...] over the factors U V^T of dl/dT.
  Matrix right, left;
  Vector gd_pick;  // d l / d d at the picks: the sums over their runs
  if (needs == BagNeeds::residual) {
    g.gd *= model.spec.map_estimate ? 0.0 : scale;
    acc.g_kdiag += g.gd.sum();
    gd_pick.resize(f.runs.count());
    if (f.runs.c == 0) gd_pick = g.gd;
    for (Index k = 0; f.runs.c > 0 && k < f.runs.c; ++k)
      gd_pick[k] = g.gd.segment(f.runs.begin(k), f.runs.begin(k + 1) - f.runs.begin(k)).sum();
    Index cols = 1;
    for (const auto& factor : g.gT_factors) cols += factor.second.cols();
    right.resize(n, cols);
    left.resize(model.num_q(), q_only ? 0 : cols);
    right.col(0) = g.gm;
    if (!q_only) left.col(0) = post.alpha;
    Index at = 1;
    for (auto& [U, V] : g.gT_factors) {
      U *= scale;
      right.middleCols(at, V.cols()) = V;
      if (!q_only) left.middleCols(at, V.cols()).noalias() = post.B.transpose() * U;
      at += V.cols();
    }
  }
  Matrix gCsym;
  if (needs == BagNeeds::exact) {
    g.gC *= scale;
    gCsym = 0.5 * (g.gC + g.gC.transpose());
    if (!q_only) model.kernel.cross_backward(gCsym, f.aa_cache, acc.g_kernel, nullptr);
  }
  for (Index b = 0; b < f.blocks; ++b) {
    BlockScratch& sb = f.scratch(b);
    const Index off = b * f.block, len = f.len_of(b);
    if (!f.keep) forward_block(model, post, data, f, b, src, sb);
    const auto K = sb.K.view();
    auto dK = sb.R.view();  // R, then dL/dK in place
    const auto gm = g.gm.segment(off, len);
    const auto gs2 = g.gs2.segment(off, len);
    // What q's moments read: alpha, Q and B (m = K^T alpha, s2 = k - diag(K^T Q K), T = B K).
    if (needs == BagNeeds::residual) {
      const Matrix KR = K * right.middleRows(off, len);
      acc.g_alpha += KR.col(0);
      Index at = 1;
      for (const auto& [U, V] : g.gT_factors) {  // T = B K through its products: dB += U (K V)^T
        acc.g_B.noalias() += U * KR.middleCols(at, V.cols()).transpose();
        at += V.cols();
      }
    } else {
      acc.g_alpha.noalias() += K * gm;
    }
    // s2 = k - diag(K^T Q K): dQ = -K diag(gs2) K^T.
    if (src.marginal_variance()) subtract_weighted_gram(acc.g_Q_lower, K, gs2, ws.U);
    if (needs == BagNeeds::exact) acc.g_Q.noalias() -= (K * gCsym) * K.transpose();
    if (needs == BagNeeds::nystrom) gemm(1.0, g.gT.middleCols(off, len), false, K, true, 1.0, acc.g_B);
    if (q_only) continue;
    // dL/dK from C = ... - K^T R, before R is overwritten.
    if (needs == BagNeeds::exact) ws.U.shape(model.num_q(), len).noalias() = -2.0 * dK * gCsym;
    // dL/dK from m and s2 (and T or C); without s2, R holds nothing yet.
    if (needs == BagNeeds::residual) {
      // dK = -2 R diag(gs2) + alpha gm^T + sum (B^T U) V^T
      if (src.marginal_variance()) {
        for (Index j = 0; j < len; ++j) dK.col(j) *= -2.0 * gs2[j];
        dK.noalias() += left * right.middleRows(off, len).transpose();
      } else {
        dK.noalias() = left * right.middleRows(off, len).transpose();
      }
    } else {
      for (Index j = 0; j < len; ++j) dK.col(j) = post.alpha * gm[j] - (2.0 * gs2[j]) * dK.col(j);
    }
    if (needs == BagNeeds::nystrom) gemm(1.0, post.B, true, g.gT.middleCols(off, len), false, 1.0, dK);
    if (needs == BagNeeds::exact) dK += ws.U.view();
    if (needs == BagNeeds::residual) {
      // d = k - diag(K^T P K) at the picks: dP = -K diag(gd) K^T, dK = -2 P K diag(gd) there.
      const BlockPicks p = picks_of(f, b);
      const auto gd = gd_pick.segment(p.first, p.count);
      subtract_weighted_gram(acc.g_P_lower, picked_columns(f, sb), gd, ws.U);
      const auto S = sb.S.view();
      for (Index t = 0; t < p.count; ++t) dK.col(f.runs.pick(p.first + t) - off) -= (2.0 * gd[t]) * S.col(t);
    }
    // The fixed effects' rows of the features are data: only the kernel rows pass on.
    features_backward(model, dK.topRows(M), sb.kernel, acc.g_kernel,
                      model.spec.learn_inducing ? &acc.g_inducing : nullptr);
  }
}

void process_bag(const Model& model, const Posterior& post, const Dataset& data, Index a, double scale,
                 const SourceTerm& src, bool with_grad, const ObjectiveOptions& opt, const SharedUnitPass& shared,
                 Workspace& ws, Accumulator& acc) {
  BagForward& f = ws.bag;
  bag_forward(model, post, data, a, src, with_grad, false, opt, ws.blocks, f);
  BagGradient g;
  acc.value += bag_term_of(model, post, data, f, src, opt, shared, with_grad ? &g : nullptr);
  if (with_grad) bag_backward(model, post, data, f, scale, src, opt, g, ws, acc);
}

}  // namespace vbagg
