#include "feature_store.hpp"

namespace vbagg {

namespace {

// What a column of features depends on besides its pixel: every latent's kernel parameters, the
// inducing inputs and the fixed effects' prior scale.
Vector feature_key(const Model& model) {
  std::vector<Vector> parts;
  for (Index q = 0; q < model.num_latents(); ++q) parts.push_back(model.kernel_of(q).params());
  Index n = 1 + model.inducing.size();
  for (const Vector& p : parts) n += p.size();
  Vector key(n);
  Index at = 0;
  for (const Vector& p : parts) {
    key.segment(at, p.size()) = p;
    at += p.size();
  }
  key.segment(at, model.inducing.size()) = model.inducing.reshaped();
  key[n - 1] = model.spec.linear_prior_sd;
  return key;
}

}  // namespace

void FeatureStore::begin_pass(const Model& model, const Dataset& data, const std::vector<Index>& bags) {
  Vector key = feature_key(model);
  const bool same = valid_ && data_ == &data && bags_ == bags && features_.rows() == model.num_q() &&
                    key.size() == key_.size() && (key.array() == key_.array()).all();
  if (same) {
    state_ = State::reading;
    return;
  }
  valid_ = false;
  const double bytes = 8.0 * static_cast<double>(model.num_q()) * static_cast<double>(data.num_pixels());
  if (bytes > budget_bytes_) {
    state_ = State::off;
    features_.resize(0, 0);
    return;
  }
  state_ = State::filling;
  key_ = std::move(key);
  bags_ = bags;
  data_ = &data;
  features_.resize(model.num_q(), data.num_pixels());
}

void FeatureStore::end_pass(bool completed) {
  if (state_ == State::filling && completed) valid_ = true;
  state_ = State::off;
}

void FeatureStore::put(Index first, const Eigen::Ref<const Matrix>& F) { features_.middleCols(first, F.cols()) = F; }

void FeatureStore::get(Index first, Eigen::Ref<Matrix> F) const { F = features_.middleCols(first, F.cols()); }

}  // namespace vbagg
