// Full-data ELBO + gradient pass at scale, and the machine's Eigen GEMM rate for comparison.
//   objective_bench [--pixels N] [--bags n] [--inducing M] [--inputs D] [--threads T] [--link exp|square]
//                   [--covariance nystrom|exact] [--repeat R]
// Prints one markdown table row per thread count.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "core/objective.hpp"

using namespace vbagg;
using Clock = std::chrono::steady_clock;

namespace {

double seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Bag sizes spread log-uniformly between 13 and 6,667 pixels (the range of the malaria data),
// rescaled to the requested total.
std::vector<Index> bag_sizes(Index pixels, Index bags, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(std::log(13.0), std::log(6667.0));
  std::vector<double> raw(bags);
  double total = 0;
  for (auto& r : raw) total += (r = std::exp(u(rng)));
  std::vector<Index> sizes(bags);
  Index used = 0;
  for (Index a = 0; a < bags; ++a) used += (sizes[a] = std::max<Index>(1, static_cast<Index>(raw[a] / total * pixels)));
  sizes[0] += pixels - used;
  return sizes;
}

double gemm_gflops(Index n, int reps) {
  const Matrix A = Matrix::Random(n, n), B = Matrix::Random(n, n);
  Matrix C(n, n);
  C.noalias() = A * B;  // warm-up
  const auto t0 = Clock::now();
  for (int r = 0; r < reps; ++r) C.noalias() = A * B;
  return 2.0 * n * n * n * reps / seconds(t0) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  Index pixels = 1000000, bags = 957, M = 200, D = 20;
  int max_threads = 2, repeat = 3;
  std::string link = "exp", covariance = "nystrom";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--pixels")
      pixels = std::stol(v);
    else if (k == "--bags")
      bags = std::stol(v);
    else if (k == "--inducing")
      M = std::stol(v);
    else if (k == "--inputs")
      D = std::stol(v);
    else if (k == "--threads")
      max_threads = std::stoi(v);
    else if (k == "--repeat")
      repeat = std::stoi(v);
    else if (k == "--link")
      link = v;
    else if (k == "--covariance")
      covariance = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  std::mt19937_64 rng(1);
  std::normal_distribution<double> normal;
  const auto sizes = bag_sizes(pixels, bags, rng);
  std::vector<Index> bag_of;
  bag_of.reserve(pixels);
  for (Index a = 0; a < bags; ++a) bag_of.insert(bag_of.end(), sizes[a], a);
  Matrix X(D, pixels);
  for (Index i = 0; i < X.size(); ++i) X.data()[i] = normal(rng);
  Vector y(bags);
  for (Index a = 0; a < bags; ++a) y[a] = std::round(0.05 * sizes[a] * (1 + 0.5 * std::abs(normal(rng))));
  const Dataset data = make_dataset(X, Vector::Ones(pixels), bag_of, y);

  Model model;
  model.spec.link = parse_link(link);
  model.spec.covariance = parse_covariance_mode(covariance);
  model.kernel = make_kernel("ard", "none", D, 0);
  Vector theta = model.kernel.params();
  theta.setConstant(std::log(std::sqrt(static_cast<double>(D))));
  theta[0] = 0;
  model.kernel.set_params(theta);
  model.inducing = Matrix(D, M);
  for (Index i = 0; i < model.inducing.size(); ++i) model.inducing.data()[i] = normal(rng);
  model.q_mean = Vector::Zero(M);
  model.q_chol = Matrix::Identity(M, M) * 0.5;
  model.mean = std::log(0.05);

  // FLOPs per pixel of the dominant dense kernels: K_WX (2MD), R = Q K (2M^2), the symmetric rank
  // update of dL/dQ (M^2), and the kernel backward GEMM (2MD).
  const double flops = static_cast<double>(pixels) * (3.0 * M * M + 4.0 * M * D);
  const double peak1 = gemm_gflops(1000, 5);
  std::printf("Eigen GEMM (1000x1000, 1 thread): %.1f GFLOP/s\n", peak1);
  std::printf("| pixels | bags | M | D | link | threads | objective only (s) | objective + gradient (s) | GFLOP/s |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (int t = 1; t <= max_threads; t *= 2) {
    ObjectiveOptions opt;
    opt.threads = t;
    double best_f = 1e300, best_g = 1e300;
    for (int r = 0; r < repeat; ++r) {
      auto t0 = Clock::now();
      elbo(model, data, nullptr, opt);
      best_f = std::min(best_f, seconds(t0));
      Vector g;
      t0 = Clock::now();
      elbo(model, data, &g, opt);
      best_g = std::min(best_g, seconds(t0));
    }
    std::printf("| %ld | %ld | %ld | %ld | %s | %d | %.2f | %.2f | %.1f |\n", static_cast<long>(pixels),
                static_cast<long>(bags), static_cast<long>(M), static_cast<long>(D), link.c_str(), t, best_f, best_g,
                flops / best_g / 1e9);
  }
  return 0;
}
