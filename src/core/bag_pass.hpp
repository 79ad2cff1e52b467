// One bag's pass of the objective (elbo): its forward pass in blocks of pixels (the moments of f
// at its pixels), its term, and its way back into a slot's gradient accumulators. Internal to the
// objective: the buffers and how long they live are what make it fast.
#pragma once

#include <algorithm>
#include <vector>

#include "bag.hpp"
#include "buffer.hpp"
#include "dataset.hpp"
#include "model.hpp"
#include "objective.hpp"

namespace vbagg {

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

struct SourceTerm {
  ModelSpec spec;
  const Posterior* post = nullptr;  // of the source's task
  const Vector* params = nullptr;
  double unit_log_sd = 0;
  Index likelihood_offset = 0, unit_offset = 0;
  BagNeeds needs = BagNeeds::marginals;
  // Residual mode: in a bag of more pixels than this, the residual variance is computed at this
  // many pixels, each standing for a run of its neighbours (ResidualRuns); 0: at every pixel.
  Index residual_cap = 0;
  // Whether the bag term reads each pixel's variance s2 (and its gradient). The sampled
  // expectation's draws m + T^T eps + sqrt(d) eta read m, d and products with T only, so its pass
  // skips s2's product Q K.
  bool marginal_variance() const { return spec.expectation != Expectation::sample; }
};

// The runs of a bag's pixels that share one residual variance: n pixels in c runs (c < n), run k
// = [k n / c, (k + 1) n / c) in the bag's order, whose middle pixel is computed. With c = 0 every
// pixel is its own run.
struct ResidualRuns {
  Index n = 0, c = 0;
  Index count() const { return c > 0 ? c : n; }
  Index begin(Index k) const { return c > 0 ? k * n / c : k; }
  Index pick(Index k) const { return (begin(k) + begin(k + 1) - 1) / 2; }
};

// Scratch of one pixel block, kept between the forward and backward pass of a bag.
struct BlockScratch {
  Buffer K;             // k(W, X_block), M x len
  Buffer R;             // Q K; the backward pass turns it into dL/dK
  Buffer S;             // residual mode: P K at the block's picks, for the residual d = k - diag(K^T P K)
  Buffer Kp;            // residual mode with runs: K's columns at the block's picks
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
  // Residual mode: the runs, each run's computed residual, and the first run picked in each block
  // (blocks + 1 entries).
  ResidualRuns runs;
  Vector d_pick;
  std::vector<Index> first_pick;
  KernelCache aa_cache;
  std::vector<BlockScratch>* store = nullptr;
  // A pass on q alone reads its blocks' features from here, or fills it (ObjectiveOptions::features).
  FeatureStore* features = nullptr;
  BlockScratch& scratch(Index b) const { return (*store)[one_scratch ? 0 : static_cast<size_t>(b)]; }
  Index len_of(Index b) const { return std::min(block, n - b * block); }
};

// The forward passes of bags sharing their unit's effect, kept from their moments to their way
// back (elbo), and reused from call to call so their buffers are allocated once.
struct KeptForwards {
  std::vector<BagForward> bags;
  std::vector<std::vector<BlockScratch>> blocks;
  std::vector<double> bytes;  // what each one's buffers hold (they only grow)
  double total = 0;           // their sum, held within a budget

  // Room for one more forward pass of `need` bytes, the holder `next` (counted from 0 for each
  // set of passes kept together), within `budget` bytes in all: its index (next is advanced), or
  // -1 when it does not fit.
  int take(size_t& next, double need, double budget);
};

// Per-thread scratch, reused from bag to bag so the large buffers are allocated once per thread.
struct Workspace {
  std::vector<BlockScratch> blocks;
  BagForward bag;
  Buffer U;
  KeptForwards unit;  // one unit's forward passes, when elbo sweeps by unit
};

// The kept forward passes of this thread.
KeptForwards& kept_forwards();

// SourceTerm::residual_cap of a source (its view of the spec) whose bag terms read `needs`: the
// model's residual_pixels for the deterministic expectations, 0 (every pixel) for the sampled one,
// whose draws take each pixel's own residual variance as its independent part.
Index residual_cap_of(const ModelSpec& source_spec, BagNeeds needs);

// The bytes a bag's kept blocks take (K, R, the kernel's buffers, and S and Kp at the picks) and its
// T: each block's buffers are sized to its pixels, and after a bag of full blocks they hold that
// many.
double kept_bytes(const Model& model, BagNeeds needs, Index residual_cap, Index n, const ObjectiveOptions& opt);

// Bag a's forward pass in blocks of pixels. The blocks' K and R are kept for the backward pass
// while they fit in the cache budget (or when `kept` says the caller has made room for them) and
// recomputed otherwise, so memory stays bounded whatever the bag size.
void bag_forward(const Model& model, const Posterior& post, const Dataset& data, Index a, const SourceTerm& src,
                 bool with_grad, bool kept, const ObjectiveOptions& opt, std::vector<BlockScratch>& store,
                 BagForward& f);

// The bag's term l_a from its forward pass, and its derivatives into g when given.
double bag_term_of(const Model& model, const Posterior& post, const Dataset& data, const BagForward& f,
                   const SourceTerm& src, const ObjectiveOptions& opt, const SharedUnitPass& shared, BagGradient* g);

// The bag's way back from its term's derivatives g into acc, through its blocks (kept from the
// forward pass, or recomputed). With ObjectiveOptions::q_moments_only only what q's moments read
// (alpha, Q and B) is accumulated.
void bag_backward(const Model& model, const Posterior& post, const Dataset& data, BagForward& f, double scale,
                  const SourceTerm& src, const ObjectiveOptions& opt, BagGradient& g, Workspace& ws, Accumulator& acc);

// One bag: forward, term, and way back. A bag sharing its unit's effect takes two calls, one with
// each half of `shared` (its moments; then the way back), and recomputes its forward pass.
void process_bag(const Model& model, const Posterior& post, const Dataset& data, Index a, double scale,
                 const SourceTerm& src, bool with_grad, const ObjectiveOptions& opt, const SharedUnitPass& shared,
                 Workspace& ws, Accumulator& acc);

}  // namespace vbagg
