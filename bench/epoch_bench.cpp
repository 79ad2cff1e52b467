// Training epoch at malaria scale (bench/malaria_problem.hpp), against the floor the hardware sets.
//   epoch_bench [--link exp|square] [--covariance nystrom|exact] [--expectation bound|delta|sample]
//               [--samples 8] [--residual-pixels 128] [--likelihood poisson|negative_binomial|binomial]
//               [--inducing 576] [--threads 2] [--repeat 2] [--pixels N] [--bags n] [--adam 0|1] [--block 2048]
//               [--tasks T] [--latents Q] [--covariate-kernel ard|ard+additive|...] [--covariates D]
// Measures the GEMM rate (core/products.hpp's backend) on `threads` cores (the floor is an epoch's FLOPs at that rate),
// then times a full-data objective pass, a full-data objective + gradient pass (one L-BFGS iteration), an Adam epoch
// (minibatches of 16 bags, each step with its own O(M^3) update), and that O(M^3) work of a step alone (an objective +
// gradient over no bags); then the polish's two kinds of pass (core/polish.hpp): with q's moment gradient beside the
// full one, and with it alone.
// --likelihood binomial (with --link logit): 1,000 tested per bag and 200 positives; the values do not
// change the work.
// --tasks T --latents Q: the same pixels as T sources of T tasks (bag a in source a mod T) on Q shared
// latent fields of M inducing points each (docs/sources.md), against the one-field model.
// --covariate-kernel: the model's kernel on the covariates (make_kernel's names; ard+additive adds an
// rbf on each covariate to the ard); --covariates D: the problem's covariates (18).
#include <Eigen/Core>
#include <chrono>
#include <cstdio>
#include <string>

#include "core/fit.hpp"
#include "core/objective.hpp"
#include "core/products.hpp"
#include "malaria_problem.hpp"

using namespace vbagg;
using Clock = std::chrono::steady_clock;

namespace {

double seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Best rate over a few repeats of GEMMs with the objective's shape, (M x M) times (M x 2048), one
// independent product per thread as the objective runs them, by the backend the passes use.
double gemm_gflops(Index M, int threads) {
  const Matrix A = Matrix::Random(M, M), B = Matrix::Random(M, 2048);
  std::vector<Matrix> C(threads, Matrix(M, B.cols()));
  double best = 0;
  for (int r = 0; r < 6; ++r) {
    const auto t0 = Clock::now();
#pragma omp parallel for num_threads(threads)
    for (int t = 0; t < threads; ++t)
      for (int k = 0; k < 4; ++k) gemm(1.0, A, false, B, false, 0.0, C[t]);
    best = std::max(best, threads * 4 * 2.0 * M * M * B.cols() / seconds(t0) / 1e9);
  }
  return best;
}

// FLOPs of one full-data objective + gradient pass as implemented in src/core/bag_pass.cpp, counting
// the dense products only (elementwise work is not counted, so the ratio to the floor is honest).
double epoch_flops(const Dataset& data, Index M, const std::string& link, const std::string& covariance) {
  const double m = static_cast<double>(M), d = static_cast<double>(data.num_inputs());
  const double n = static_cast<double>(data.num_pixels());
  // Marginals: K_WX (2MD), R = Q K (2M^2), the rank-n update of dL/dQ (M^2), the kernel backward (2MD).
  double flops = n * (3 * m * m + 4 * m * d);
  if (link == "square" && covariance == "nystrom")
    // T = B K, dL/dB += gT K^T, dL/dK += B^T gT, and the bag term's G = T P T^T and G T.
    flops += n * 10 * m * m;
  if (link == "square" && covariance == "exact") {
    for (Index a = 0; a < data.num_bags(); ++a) {
      const double na = static_cast<double>(data.bag_size(a));
      // C = k(X,X) - K^T R, then K gC K^T, R gC and the kernel backward on (X, X).
      flops += na * na * (6 * m + 4 * d) + 2 * m * m * na;
    }
  }
  return flops;
}

// The benchmark model as T tasks on Q latents, each latent with the model's kernel and inducing
// inputs, q the prior over the new latents' values.
void make_mixed(Model& model, Dataset& data, Index tasks, Index latents) {
  const Index M = model.num_inducing();
  data.source.resize(static_cast<size_t>(data.num_bags()));
  for (Index a = 0; a < data.num_bags(); ++a) data.source[static_cast<size_t>(a)] = static_cast<int>(a % tasks);
  ModelSpec& s = model.spec;
  s.latents = latents;
  s.source_name = "t0";
  s.tasks = {"t0"};
  for (Index d = 1; d < tasks; ++d) {
    SourceSpec o = s.source(0);
    o.name = "t" + std::to_string(d);
    o.task = d;
    s.more_sources.push_back(o);
    s.tasks.push_back(o.name);
  }
  model.more_sources.resize(static_cast<size_t>(tasks - 1), {model.likelihood_params, model.unit_effect});
  const Matrix W = model.inducing;
  model.inducing.resize(W.rows(), latents * M);
  for (Index q = 0; q < latents; ++q) {
    model.inducing.middleCols(q * M, M) = W;
    if (q > 0) model.more_kernels.push_back(model.kernel);
  }
  model.inducing_sizes.assign(static_cast<size_t>(latents), M);
  const Vector m = model.q_mean;
  const Matrix L = model.q_chol;
  model.q_mean = Vector::Zero(latents * M);
  model.q_mean.head(M) = m;
  model.q_chol = Matrix::Identity(latents * M, latents * M);
  model.q_chol.topLeftCorner(M, M) = L;
  model.mixing = Matrix::Constant(tasks, latents, 0.5);
  model.task_means = Vector::Constant(tasks - 1, model.mean);
}

}  // namespace

int main(int argc, char** argv) {
  bench::ProblemOptions po;
  int threads = 2, repeat = 2, adam = 1, samples = ModelSpec{}.samples;
  Index tasks = 1, latents = 1, residual_pixels = ModelSpec{}.residual_pixels;
  Index block = ObjectiveOptions{}.block;
  std::string link = "exp", covariance = "nystrom", expectation = "bound", likelihood = "poisson";
  std::string covariate_kernel = "ard";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (bench::read_problem_flag(k, v, po)) continue;
    if (k == "--threads")
      threads = std::stoi(v);
    else if (k == "--repeat")
      repeat = std::stoi(v);
    else if (k == "--link")
      link = v;
    else if (k == "--covariance")
      covariance = v;
    else if (k == "--expectation")
      expectation = v;
    else if (k == "--likelihood")
      likelihood = v;
    else if (k == "--samples")
      samples = std::stoi(v);
    else if (k == "--residual-pixels")
      residual_pixels = std::stol(v);
    else if (k == "--block")
      block = std::stol(v);
    else if (k == "--adam")
      adam = std::stoi(v);
    else if (k == "--tasks")
      tasks = std::stol(v);
    else if (k == "--latents")
      latents = std::stol(v);
    else if (k == "--covariate-kernel")
      covariate_kernel = v;
    else if (k == "--covariates")
      po.covariates = std::stol(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  const Index M = po.inducing;
  auto t0 = Clock::now();
  Dataset data = bench::make_problem(po);
  const double t_problem = seconds(t0);
  t0 = Clock::now();
  // The problem's model starts as a count model; the binomial takes its link after.
  const bool binomial = parse_likelihood(likelihood) == LikelihoodKind::binomial;
  Model model =
      bench::make_problem_model(data, po.covariates, M, binomial ? "exp" : link, covariance, 1, covariate_kernel);
  model.spec.expectation = parse_expectation(expectation);
  model.spec.samples = samples;
  model.spec.residual_pixels = residual_pixels;
  model.spec.likelihood = parse_likelihood(likelihood);
  if (model.spec.likelihood == LikelihoodKind::negative_binomial)
    model.likelihood_params = Vector::Constant(1, std::log(100.0));
  if (binomial) {
    model.spec.link = parse_link(link);
    data.trials = Vector::Constant(data.num_bags(), 1000);
    data.response = Vector::Constant(data.num_bags(), 200);
  }
  if (tasks > 1 || latents > 1) make_mixed(model, data, tasks, latents);
  model.spec.validate();
  std::printf("covariate kernel %s; ", covariate_kernel.c_str());
  std::printf("tasks %ld, latents %ld; products by %s\n", static_cast<long>(tasks), static_cast<long>(latents),
              products_backend_description().c_str());
  std::printf("problem: %ld pixels, %ld bags (%ld-%ld), D = %ld, M = %ld (built in %.1f s, init %.1f s)\n",
              static_cast<long>(data.num_pixels()), static_cast<long>(data.num_bags()), static_cast<long>(po.min_bag),
              static_cast<long>(po.max_bag), static_cast<long>(data.num_inputs()), static_cast<long>(M), t_problem,
              seconds(t0));
  const double flops = epoch_flops(data, M, link, covariance);
  std::printf("FLOPs per objective + gradient pass: %.3g\n\n", flops);
  std::printf(
      "| likelihood | link | expectation | covariance | threads | GEMM GFLOP/s | floor (s) | objective (s) | objective "
      "+ gradient (s) | "
      "ratio to floor | Adam epoch (s) |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  {
    const int t = threads;
    const double peak = gemm_gflops(M, t);
    ObjectiveOptions opt;
    opt.threads = t;
    opt.block = block;
    double best_f = 1e300, best_g = 1e300;
    double value = 0;
    for (int r = 0; r < repeat; ++r) {
      t0 = Clock::now();
      value = elbo(model, data, nullptr, opt).elbo;
      best_f = std::min(best_f, seconds(t0));
      Vector g;
      t0 = Clock::now();
      elbo(model, data, &g, opt);
      best_g = std::min(best_g, seconds(t0));
    }
    double adam_epoch = NAN;
    if (adam) {
      Model m = model;
      FitOptions fo;
      fo.epochs = 1;
      fo.threads = t;
      fo.staged = false;  // one epoch with every parameter free
      std::vector<Index> all(data.num_bags());
      for (Index a = 0; a < data.num_bags(); ++a) all[a] = a;
      t0 = Clock::now();
      fit(m, data, all, {}, fo);
      adam_epoch = seconds(t0);
    }
    // What every step costs besides its bags: the posterior, the KL and the way back to L_v and
    // the kernel (an objective + gradient over no bags).
    double step = 1e300;
    for (int r = 0; r < 5; ++r) {
      Vector g;
      t0 = Clock::now();
      elbo(model, data, std::vector<Index>{}, 1.0, &g, opt);
      step = std::min(step, seconds(t0));
    }
    const double floor = flops / (peak * 1e9);
    std::printf("| %s | %s | %s | %s | %d | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", likelihood.c_str(),
                link.c_str(), expectation.c_str(), covariance.c_str(), t, peak, floor, best_f, best_g, best_g / floor,
                adam_epoch);
    std::printf("\nper-step work besides the bags (O(M^3)): %.3f s\nthe objective's value: %.10g\n", step, value);
    // The polish's passes: the full gradient with q's moment gradient beside it (its reading), and
    // q's moment gradient alone (its steps on q before the reading).
    ObjectiveOptions with_q = opt, q_alone = opt;
    with_q.q_moments_gradient = q_alone.q_moments_gradient = q_alone.q_moments_only = true;
    double best_with_q = 1e300, best_q_alone = 1e300;
    for (int r = 0; r < repeat; ++r) {
      Vector g;
      t0 = Clock::now();
      elbo(model, data, &g, with_q);
      best_with_q = std::min(best_with_q, seconds(t0));
      t0 = Clock::now();
      elbo(model, data, &g, q_alone);
      best_q_alone = std::min(best_q_alone, seconds(t0));
    }
    std::printf("objective + gradient + q's moment gradient: %.2f s; objective + q's moment gradient alone: %.2f s\n",
                best_with_q, best_q_alone);
    std::fflush(stdout);
  }
  return 0;
}
