#include "products.hpp"

#include <dlfcn.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace vbagg {

namespace {

// CBLAS's enumerators (cblas.h), passed as ints by the C ABI.
constexpr int kColMajor = 102, kNoTrans = 111, kTrans = 112, kLower = 122;
using DgemmFn = void (*)(int, int, int, int, int, int, double, const double*, int, const double*, int, double, double*,
                         int);
using DsyrkFn = void (*)(int, int, int, int, int, double, const double*, int, double, double*, int);

struct OpenBlas {
  void* handle = nullptr;
  DgemmFn dgemm = nullptr;
  DsyrkFn dsyrk = nullptr;
  std::string description;
};

// The OpenBLAS core whose kernels suit this CPU, by its feature flags: OpenBLAS's own detection
// does not know recent CPUs and falls back to generic kernels. Null leaves the choice to it.
const char* core_for_this_cpu() {
  if (const char* c = std::getenv("VBAGG_OPENBLAS_CORE")) return c;
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  if (avx512) return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

// Sets an environment variable for the length of a scope, then puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

OpenBlas load_openblas() {
  OpenBlas lib;
  void* handle = nullptr;
  {
    // OpenBLAS reads both when it loads: the core's kernels, and one thread per call. The core
    // replaces any OPENBLAS_CORETYPE of the environment, which is often set once for a machine to
    // an older core that works around the misdetection, and would cost vbagg its fastest kernels.
    const ScopedEnv core("OPENBLAS_CORETYPE", core_for_this_cpu());
    const ScopedEnv threads("OPENBLAS_NUM_THREADS", "1");
    handle = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  }
  if (!handle) return lib;
  using ParallelFn = int (*)();
  using NameFn = char* (*)();
  const auto parallel = reinterpret_cast<ParallelFn>(dlsym(handle, "openblas_get_parallel"));
  const auto corename = reinterpret_cast<NameFn>(dlsym(handle, "openblas_get_corename"));
  const auto config = reinterpret_cast<NameFn>(dlsym(handle, "openblas_get_config"));
  lib.dgemm = reinterpret_cast<DgemmFn>(dlsym(handle, "cblas_dgemm"));
  lib.dsyrk = reinterpret_cast<DsyrkFn>(dlsym(handle, "cblas_dsyrk"));
  // A sequential flavour (parallel() == 0) need not be safe to call from several threads at once.
  if (!parallel || !lib.dgemm || !lib.dsyrk || parallel() == 0) {
    dlclose(handle);
    return OpenBlas{};
  }
  lib.handle = handle;
  std::string version = config ? config() : "OpenBLAS";
  version = version.substr(0, version.find(' ', version.find(' ') + 1));  // "OpenBLAS 0.3.21"
  lib.description = version + " (" + (corename ? corename() : "?") + " kernels)";
  return lib;
}

const OpenBlas& openblas() {
  static const OpenBlas lib = load_openblas();
  return lib;
}

bool fits_int(Index n) { return n <= INT_MAX; }

template <class L, class R>
void eigen_gemm(double alpha, const L& a, const R& b, double beta, Eigen::Ref<Matrix>& C) {
  // alpha = 1 and beta in {0, 1} as the plain expressions, so results are those of `C = A B`.
  if (beta != 0 && beta != 1) C *= beta;
  if (beta == 0) {
    if (alpha == 1)
      C.noalias() = a * b;
    else
      C.noalias() = alpha * a * b;
  } else {
    if (alpha == 1)
      C.noalias() += a * b;
    else
      C.noalias() += alpha * a * b;
  }
}

}  // namespace

bool openblas_available() { return openblas().handle != nullptr; }

ProductsBackend products_backend() {
  static const ProductsBackend backend = [] {
    const char* asked = std::getenv("VBAGG_PRODUCTS");
    if (asked && std::strcmp(asked, "eigen") == 0) return ProductsBackend::eigen;
    return openblas_available() ? ProductsBackend::openblas : ProductsBackend::eigen;
  }();
  return backend;
}

std::string products_backend_description() {
  return products_backend() == ProductsBackend::openblas ? openblas().description : "Eigen";
}

void gemm_with(ProductsBackend backend, double alpha, const Eigen::Ref<const Matrix>& A, bool transpose_a,
               const Eigen::Ref<const Matrix>& B, bool transpose_b, double beta, Eigen::Ref<Matrix> C) {
  const Index m = C.rows(), n = C.cols(), k = transpose_a ? A.rows() : A.cols();
  if (backend == ProductsBackend::openblas) {
    if (!openblas_available()) throw std::logic_error("gemm_with: OpenBLAS is not loaded");
    if (m == 0 || n == 0) return;
    if (k > 0 && fits_int(m) && fits_int(n) && fits_int(k) && fits_int(A.outerStride()) && fits_int(B.outerStride()) &&
        fits_int(C.outerStride())) {
      openblas().dgemm(kColMajor, transpose_a ? kTrans : kNoTrans, transpose_b ? kTrans : kNoTrans, static_cast<int>(m),
                       static_cast<int>(n), static_cast<int>(k), alpha, A.data(),
                       static_cast<int>(std::max<Index>(1, A.outerStride())), B.data(),
                       static_cast<int>(std::max<Index>(1, B.outerStride())), beta, C.data(),
                       static_cast<int>(std::max<Index>(1, C.outerStride())));
      return;
    }
  }
  if (transpose_a && transpose_b)
    eigen_gemm(alpha, A.transpose(), B.transpose(), beta, C);
  else if (transpose_a)
    eigen_gemm(alpha, A.transpose(), B, beta, C);
  else if (transpose_b)
    eigen_gemm(alpha, A, B.transpose(), beta, C);
  else
    eigen_gemm(alpha, A, B, beta, C);
}

void rank_update_lower_with(ProductsBackend backend, double alpha, const Eigen::Ref<const Matrix>& A,
                            Eigen::Ref<Matrix> C) {
  if (backend == ProductsBackend::openblas) {
    if (!openblas_available()) throw std::logic_error("rank_update_lower_with: OpenBLAS is not loaded");
    if (C.rows() == 0) return;
    if (A.cols() > 0 && fits_int(C.rows()) && fits_int(A.cols()) && fits_int(A.outerStride()) &&
        fits_int(C.outerStride())) {
      openblas().dsyrk(kColMajor, kLower, kNoTrans, static_cast<int>(C.rows()), static_cast<int>(A.cols()), alpha,
                       A.data(), static_cast<int>(std::max<Index>(1, A.outerStride())), 1.0, C.data(),
                       static_cast<int>(std::max<Index>(1, C.outerStride())));
      return;
    }
  }
  C.selfadjointView<Eigen::Lower>().rankUpdate(A, alpha);
}

// OpenBLAS hands out its work buffers under one lock, taken on every call, and two threads making
// many small calls queue on it, yielding the processor (a 200-unit country's fit, M = 100-200 and
// small bags, ran 7x slower): products below about a millisecond of work stay with Eigen.
constexpr double kOpenBlasMinFlops = 1e8;

ProductsBackend backend_for(double flops) {
  return flops >= kOpenBlasMinFlops ? products_backend() : ProductsBackend::eigen;
}

void gemm(double alpha, const Eigen::Ref<const Matrix>& A, bool transpose_a, const Eigen::Ref<const Matrix>& B,
          bool transpose_b, double beta, Eigen::Ref<Matrix> C) {
  const double flops = 2.0 * static_cast<double>(C.rows()) * static_cast<double>(C.cols()) *
                       static_cast<double>(transpose_a ? A.rows() : A.cols());
  gemm_with(backend_for(flops), alpha, A, transpose_a, B, transpose_b, beta, C);
}

void rank_update_lower(double alpha, const Eigen::Ref<const Matrix>& A, Eigen::Ref<Matrix> C) {
  const double flops = static_cast<double>(C.rows()) * static_cast<double>(C.rows()) * static_cast<double>(A.cols());
  rank_update_lower_with(backend_for(flops), alpha, A, C);
}

}  // namespace vbagg
