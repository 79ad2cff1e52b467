// Every pixel's features (Model's kernel rows, then the fixed effects' rows), kept from one pass
// of the objective to the next while the kernel and the inducing inputs stay where they are.
//
// The polish and the point estimates' spread read the objective after natural-gradient steps on q
// alone, at the same kernel (ObjectiveOptions::q_moments_only): each of those passes recomputed
// the same M x N kernel matrix (the kernel's features took 23 % of a 200-unit country's fit). With
// a store, the first such pass fills it and the next ones copy from it. The passes' numbers are the same to the bit: a
// column of features depends on its pixel and the kernel alone.
#pragma once

#include <vector>

#include "dataset.hpp"
#include "model.hpp"

namespace vbagg {

class FeatureStore {
 public:
  // Keeps at most budget_mb MiB of features; a dataset whose features need more is not stored.
  explicit FeatureStore(double budget_mb) : budget_bytes_(budget_mb * 1048576.0) {}

  // Before a pass over `bags` of `data`: reading when the store holds this model's features of
  // those bags, else filling while they fit in the budget, else neither (the pass computes its
  // features as without a store).
  void begin_pass(const Model& model, const Dataset& data, const std::vector<Index>& bags);
  // After the pass: a filling pass that ran to its end makes the store readable.
  void end_pass(bool completed);

  bool reading() const { return state_ == State::reading; }
  bool filling() const { return state_ == State::filling; }
  // Columns [first, first + F.cols()) of the data's pixels. Passes fill disjoint columns from
  // several threads at once.
  void put(Index first, const Eigen::Ref<const Matrix>& F);
  void get(Index first, Eigen::Ref<Matrix> F) const;

 private:
  enum class State { off, filling, reading };
  double budget_bytes_;
  State state_ = State::off;
  bool valid_ = false;  // features_ hold the key's features of bags_
  Vector key_;          // the kernels' parameters, the inducing inputs, the fixed effects' prior sd
  std::vector<Index> bags_;
  const Dataset* data_ = nullptr;
  Matrix features_;  // num_q x the data's pixels
};

// One pass's use of a store (none when null): begin_pass on construction, end_pass when the pass
// leaves by any way, completed only if it was marked so.
class FeatureStorePass {
 public:
  FeatureStorePass(FeatureStore* store, const Model& model, const Dataset& data, const std::vector<Index>& bags)
      : store_(store) {
    if (store_) store_->begin_pass(model, data, bags);
  }
  ~FeatureStorePass() {
    if (store_) store_->end_pass(completed);
  }
  FeatureStorePass(const FeatureStorePass&) = delete;
  FeatureStorePass& operator=(const FeatureStorePass&) = delete;
  bool completed = false;

 private:
  FeatureStore* store_;
};

}  // namespace vbagg
