// The dense products of the pixel passes (M x M by M x pixels, and the rank updates back), by
// OpenBLAS's kernels when the library is on the machine and Eigen's otherwise.
//
// Why two: at M = 576 on an AVX-512 machine OpenBLAS's double GEMM runs about 1.2x faster than
// Eigen's, and these products are two thirds of a pass (docs/benchmarks.md). OpenBLAS picks its
// kernels when it is loaded, and on CPUs newer than it knows it falls back to slow generic ones
// unless OPENBLAS_CORETYPE names a core. So it is loaded at run time (dlopen), after the core is
// chosen from the CPU's own feature flags (VBAGG_OPENBLAS_CORE names another), and with one thread
// per call: vbagg's threads already share out the bags. A machine without it computes the same
// products with Eigen.
#pragma once

#include <string>

#include "types.hpp"

namespace vbagg {

enum class ProductsBackend { eigen, openblas };

// The backend in use: OpenBLAS when libopenblas.so.0 loads and is not a single-threaded flavour
// (those may not be safe to call from several threads), unless the environment variable
// VBAGG_PRODUCTS=eigen asks for Eigen. Chosen once, on the first call; the first call to any
// product below makes it, so call this from one thread before starting several.
ProductsBackend products_backend();
// What to log: "OpenBLAS 0.3.21 (SkylakeX kernels)" or "Eigen".
std::string products_backend_description();

// Both take OpenBLAS for products of at least 1e8 flops only: smaller ones queue on its lock
// (products.cpp), and Eigen computes them.
// C = alpha op(A) op(B) + beta C, op(X) = X or X^T; with beta = 0, C's old values are not read.
void gemm(double alpha, const Eigen::Ref<const Matrix>& A, bool transpose_a, const Eigen::Ref<const Matrix>& B,
          bool transpose_b, double beta, Eigen::Ref<Matrix> C);
// lower(C) += alpha A A^T; C's strictly upper triangle is left as it was.
void rank_update_lower(double alpha, const Eigen::Ref<const Matrix>& A, Eigen::Ref<Matrix> C);

// The same through a given backend (tests compare the two); `openblas` throws when it is not loaded.
void gemm_with(ProductsBackend backend, double alpha, const Eigen::Ref<const Matrix>& A, bool transpose_a,
               const Eigen::Ref<const Matrix>& B, bool transpose_b, double beta, Eigen::Ref<Matrix> C);
void rank_update_lower_with(ProductsBackend backend, double alpha, const Eigen::Ref<const Matrix>& A,
                            Eigen::Ref<Matrix> C);
// Whether OpenBLAS loaded (whatever VBAGG_PRODUCTS says).
bool openblas_available();

}  // namespace vbagg
