// Writes a Poisson/exp-link problem (or, random mode, a binomial/logit one), a model on it, and
// vbagg's ELBO and gradient there, in the raw form bench/reference/vbagg_torch.py reads (see
// README.md beside this file).
//
//   reference_export random DIR --seed S [--pixels 300] [--bags 12] [--inducing 7] [--covariates 3]
//                                        [--learn-inducing 0|1] [--threads 1]
//                                        [--expectation bound|delta|sample] [--samples 4]
//                                        [--likelihood poisson|binomial]
//   reference_export malaria DIR [--inducing 576] [--learn-inducing 0|1] [--threads 1]
//
// `random` is a small problem with every parameter away from its initial value, so that every
// gradient term is exercised; `malaria` is the benchmark problem of bench/malaria_problem.hpp.
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/kernel.hpp"
#include "core/objective.hpp"
#include "malaria_problem.hpp"

using namespace vbagg;

namespace {

// The key of the sampled expectation's draws in an exported problem.
const unsigned long long kDrawSeed = 12345, kDrawStep = 7;

struct Args {
  std::string mode, dir;
  unsigned long long seed = 0;
  bool has_seed = false;
  Index pixels = 300, bags = 12, inducing = -1, covariates = 3;
  bool learn_inducing = false;
  int threads = 1;
  std::string expectation = "bound";
  int samples = 4;
  bool binomial = false;
};

const char* kUsage =
    "usage: reference_export random DIR --seed S [--pixels N] [--bags n] [--inducing M] [--covariates C]\n"
    "                               [--learn-inducing 0|1] [--threads T] [--expectation bound|delta|sample]\n"
    "                               [--samples S] [--likelihood poisson|binomial]\n"
    "       reference_export malaria DIR [--inducing M] [--learn-inducing 0|1] [--threads T]\n";

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "reference_export: %s\n%s", msg.c_str(), kUsage);
  std::exit(2);
}

long long parse_int(const std::string& flag, const std::string& text, long long lo) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0) usage_error(flag + " expects an integer, got '" + text + "'");
  if (v < lo) usage_error(flag + " must be at least " + std::to_string(lo) + ", got " + text);
  return v;
}

Args parse_args(int argc, char** argv) {
  if (argc < 3) usage_error("expected a mode (random|malaria) and an output directory");
  Args a;
  a.mode = argv[1];
  a.dir = argv[2];
  if (a.mode != "random" && a.mode != "malaria") usage_error("unknown mode '" + a.mode + "'");
  for (int i = 3; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage_error(flag + " needs a value");
    const std::string value = argv[i + 1];
    const bool random_only =
        flag == "--seed" || flag == "--pixels" || flag == "--bags" || flag == "--covariates" || flag == "--likelihood";
    if (random_only && a.mode != "random") usage_error(flag + " applies to the random mode only");
    if (flag == "--seed") {
      a.seed = static_cast<unsigned long long>(parse_int(flag, value, 0));
      a.has_seed = true;
    } else if (flag == "--pixels") {
      a.pixels = parse_int(flag, value, 1);
    } else if (flag == "--bags") {
      a.bags = parse_int(flag, value, 1);
    } else if (flag == "--inducing") {
      a.inducing = parse_int(flag, value, 1);
    } else if (flag == "--covariates") {
      a.covariates = parse_int(flag, value, 1);
    } else if (flag == "--learn-inducing") {
      if (value != "0" && value != "1") usage_error("--learn-inducing expects 0 or 1, got '" + value + "'");
      a.learn_inducing = value == "1";
    } else if (flag == "--threads") {
      a.threads = static_cast<int>(parse_int(flag, value, 1));
    } else if (flag == "--expectation") {
      if (value != "bound" && value != "delta" && value != "sample")
        usage_error("--expectation expects bound, delta or sample, got '" + value + "'");
      a.expectation = value;
    } else if (flag == "--samples") {
      a.samples = static_cast<int>(parse_int(flag, value, 1));
    } else if (flag == "--likelihood") {
      if (value != "poisson" && value != "binomial")
        usage_error("--likelihood expects poisson or binomial, got '" + value + "'");
      a.binomial = value == "binomial";
    } else {
      usage_error("unknown option '" + flag + "'");
    }
  }
  if (a.mode == "random") {
    if (!a.has_seed) usage_error("the random mode needs --seed");
    if (a.binomial && a.expectation == "bound") usage_error("the binomial likelihood has no bound expectation");
    if (a.pixels < a.bags) usage_error("--pixels must be at least --bags (every bag needs a pixel)");
    if (a.inducing < 0) a.inducing = 7;
  } else if (a.inducing < 0) {
    a.inducing = 576;
  }
  return a;
}

// Small problem with bags of uneven size, positive populations, partial coverage on some pixels
// and some bags with y = 0 (whose log-sum term vanishes).
Dataset random_dataset(const Args& a, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> unif(0, 1);
  const Index D = a.covariates + 2;
  Matrix X(D, a.pixels);
  for (Index i = 0; i < X.size(); ++i) X.data()[i] = normal(rng);
  Vector population(a.pixels);
  for (Index i = 0; i < a.pixels; ++i) population[i] = std::exp(1.0 + 0.7 * normal(rng));
  // Every bag gets one pixel, the rest land at random, so bag sizes vary.
  std::vector<Index> bag_of(a.pixels);
  for (Index i = 0; i < a.pixels; ++i) bag_of[i] = i < a.bags ? i : static_cast<Index>(rng() % a.bags);
  Vector y(a.bags);
  for (Index b = 0; b < a.bags; ++b)
    y[b] = b % 4 == 1 ? 0.0 : static_cast<double>(std::poisson_distribution<long>(20.0 * unif(rng) + 1)(rng));
  Dataset data = make_dataset(X, population, bag_of, y);
  for (Index i = 0; i < a.pixels; ++i)
    if (unif(rng) < 0.2) data.coverage[i] = 0.1 + 0.9 * unif(rng);
  data.validate();
  return data;
}

// The binomial version of a random problem: 20-200 tested per bag and positives from a prevalence of
// 2-60 %, a quarter of the bags with none.
void make_binomial(Dataset& data, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unif(0, 1);
  data.trials.resize(data.num_bags());
  for (Index b = 0; b < data.num_bags(); ++b) {
    data.trials[b] = static_cast<double>(20 + rng() % 181);
    const double p = 0.02 + 0.58 * unif(rng);
    data.response[b] =
        b % 4 == 1 ? 0.0
                   : static_cast<double>(std::binomial_distribution<long>(static_cast<long>(data.trials[b]), p)(rng));
  }
  data.validate();
}

Model random_model(const Args& a, const Dataset& data, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  Model m;
  m.spec.likelihood = LikelihoodKind::poisson;
  m.spec.link = Link::exp;
  m.spec.learn_inducing = a.learn_inducing;
  m.jitter = 1e-6;
  m.kernel = make_kernel("ard", "matern32", a.covariates, 2);
  const Index D = data.num_inputs(), M = a.inducing;
  for (auto& p : m.kernel.parts()) {
    p.log_variance = 0.3 * normal(rng);
    // Lengthscales near the typical distance of standard normal inputs keep K_WW well-conditioned
    // and the kernels neither flat nor diagonal.
    for (Index d = 0; d < p.log_lengthscale.size(); ++d)
      p.log_lengthscale[d] = std::log(std::sqrt(static_cast<double>(p.dim))) + 0.3 * normal(rng);
  }
  m.inducing.resize(D, M);
  for (Index i = 0; i < m.inducing.size(); ++i) m.inducing.data()[i] = normal(rng);
  m.q_mean.resize(M);
  for (Index k = 0; k < M; ++k) m.q_mean[k] = 0.5 * normal(rng);
  m.q_chol = Matrix::Zero(M, M);
  for (Index c = 0; c < M; ++c) {
    m.q_chol(c, c) = 0.7 * std::exp(0.2 * normal(rng));
    for (Index r = c + 1; r < M; ++r) m.q_chol(r, c) = 0.15 * normal(rng);
  }
  m.mean = -1.5 + 0.3 * normal(rng);
  return m;
}

void write_raw(const std::filesystem::path& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

void write_f64(const std::filesystem::path& path, const double* data, Index count) {
  write_raw(path, data, static_cast<size_t>(count) * sizeof(double));
}

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// Everything the reader needs besides the raw arrays, as JSON.
void write_meta(const std::filesystem::path& path, const Args& a, const Dataset& data, const Model& model,
                const ObjectiveValue& v, double seconds) {
  std::string s = "{\n";
  s += "  \"mode\": \"" + a.mode + "\",\n";
  s += "  \"pixels\": " + std::to_string(data.num_pixels()) + ",\n";
  s += "  \"bags\": " + std::to_string(data.num_bags()) + ",\n";
  s += "  \"inputs\": " + std::to_string(data.num_inputs()) + ",\n";
  s += "  \"inducing\": " + std::to_string(model.num_inducing()) + ",\n";
  s += "  \"covariates\": " + std::to_string(model.kernel.parts().front().dim) + ",\n";
  s += "  \"likelihood\": \"" + to_string(model.spec.likelihood) + "\",\n";
  s += "  \"link\": \"" + to_string(model.spec.link) + "\",\n";
  s += "  \"expectation\": \"" + to_string(model.spec.expectation) + "\",\n";
  // The sampled expectation's draws: stream (draw_seed, draw_step, bag), see core/counter_rng.hpp.
  s += "  \"samples\": " + std::to_string(model.spec.samples) + ",\n";
  s += "  \"draw_seed\": " + std::to_string(kDrawSeed) + ",\n  \"draw_step\": " + std::to_string(kDrawStep) + ",\n";
  s += "  \"learn_inducing\": " + std::string(model.spec.learn_inducing ? "true" : "false") + ",\n";
  s += "  \"jitter\": " + num(model.jitter) + ",\n";
  s += "  \"jitter_used\": " + num(v.jitter_used) + ",\n";
  s += "  \"num_params\": " + std::to_string(model.num_params()) + ",\n";
  s += "  \"kernel_parts\": [";
  const auto& parts = model.kernel.parts();
  for (size_t c = 0; c < parts.size(); ++c) {
    const auto& p = parts[c];
    s += std::string(c ? ", " : "") + "{\"type\": \"" + to_string(p.type) +
         "\", \"begin\": " + std::to_string(p.begin) + ", \"dim\": " + std::to_string(p.dim) +
         ", \"lengthscales\": " + std::to_string(p.log_lengthscale.size()) + "}";
  }
  s += "],\n";
  s += "  \"elbo\": " + num(v.elbo) + ",\n";
  s += "  \"data_term\": " + num(v.data_term) + ",\n";
  s += "  \"kl\": " + num(v.kl) + ",\n";
  s += "  \"vbagg_threads\": " + std::to_string(a.threads) + ",\n";
  s += "  \"vbagg_seconds\": " + num(seconds) + "\n";
  s += "}\n";
  write_raw(path, s.data(), s.size());
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse_args(argc, argv);
  try {
    Dataset data;
    Model model;
    if (a.mode == "random") {
      std::mt19937_64 rng(a.seed);
      data = random_dataset(a, rng);
      model = random_model(a, data, rng);
      if (a.binomial) {
        make_binomial(data, rng);
        model.spec.likelihood = LikelihoodKind::binomial;
        model.spec.link = Link::logit;
      }
    } else {
      data = bench::make_problem(bench::ProblemOptions{});
      model = bench::make_problem_model(data, 18, a.inducing, "exp", "nystrom");
      model.spec.learn_inducing = a.learn_inducing;
    }

    model.spec.expectation = parse_expectation(a.expectation);
    model.spec.samples = a.samples;
    ObjectiveOptions opt;
    opt.threads = a.threads;  // the value is bit-identical for any thread count up to opt.slots
    opt.draw_seed = kDrawSeed;
    opt.draw_step = kDrawStep;
    Vector grad;
    const auto t0 = std::chrono::steady_clock::now();
    const ObjectiveValue v = elbo(model, data, &grad, opt);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    const std::filesystem::path dir(a.dir);
    std::filesystem::create_directories(dir);
    // The reader takes the arrays as little-endian; Eigen stores the D x N inputs column by
    // column, which is N x D pixel-major.
    write_f64(dir / "inputs.f64", data.inputs.data(), data.inputs.size());
    write_f64(dir / "population.f64", data.population.data(), data.population.size());
    write_f64(dir / "coverage.f64", data.coverage.data(), data.coverage.size());
    write_f64(dir / "response.f64", data.response.data(), data.response.size());
    if (a.binomial) write_f64(dir / "trials.f64", data.trials.data(), data.trials.size());
    const std::vector<std::int64_t> offsets(data.offsets.begin(), data.offsets.end());
    write_raw(dir / "offsets.i64", offsets.data(), offsets.size() * sizeof(std::int64_t));
    const Vector theta = model.pack();
    write_f64(dir / "theta.f64", theta.data(), theta.size());
    write_f64(dir / "inducing.f64", model.inducing.data(), model.inducing.size());
    write_f64(dir / "grad.f64", grad.data(), grad.size());
    write_meta(dir / "meta.json", a, data, model, v, seconds);
    std::printf("%s problem: %lld pixels, %lld bags, M = %lld, %lld parameters; ELBO %.17g (%.3f s); written to %s\n",
                a.mode.c_str(), static_cast<long long>(data.num_pixels()), static_cast<long long>(data.num_bags()),
                static_cast<long long>(model.num_inducing()), static_cast<long long>(model.num_params()), v.elbo,
                seconds, dir.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reference_export: %s\n", e.what());
    return 1;
  }
  return 0;
}
