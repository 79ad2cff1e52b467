// Subnormal numbers (magnitudes below 2.2e-308) flushed to zero on this thread while a guard
// lives. Once a fit switches a kernel part off (its variance falls to e^-9 and below), the kernel
// values of distant points and their products land there, and x86 processors take each subnormal
// operand through a slow microcode assist: on the 300,000-pixel benchmark country the epochs after
// the part switched off took 5 s instead of 0.9 s (docs/benchmarks.md). Flushed, such a value is
// 0: added to the normal numbers it meets, it was below their rounding anyway, and the benchmark's
// ELBO kept every printed digit.
//
// The guard restores the thread's previous mode when it ends, so callers see no change. Every
// parallel region whose threads evaluate kernels opens one, since each thread has its own mode.
// On processors other than x86 it does nothing.
#pragma once

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace vbagg {

class FlushDenormals {
 public:
  FlushDenormals() {
#if defined(__SSE__)
    saved_ = _mm_getcsr();
    _mm_setcsr(saved_ | kFlushToZero | kDenormalsAreZero);
#endif
  }
  ~FlushDenormals() {
#if defined(__SSE__)
    _mm_setcsr(saved_);
#endif
  }
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;

 private:
#if defined(__SSE__)
  // MXCSR: results below the normal range become 0 (FTZ), and so do such operands (DAZ).
  static constexpr unsigned kFlushToZero = 0x8000, kDenormalsAreZero = 0x0040;
  unsigned saved_ = 0;
#endif
};

}  // namespace vbagg
