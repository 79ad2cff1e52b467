// lgamma(y + r) - lgamma(r) - y log r, kept to full precision at any r: the negative binomial's
// and the beta-binomial's normalising constants at their Poisson and binomial limits.
#pragma once

namespace vbagg {

// lgamma(y + r) - lgamma(r) - y log r for y >= 0 and r > 0 (0 at y = 0, and y(y - 1) / (2r) as r
// grows), and its derivative in log r, r (digamma(y + r) - digamma(r)) - y, into *d_log_r when
// non-null. Differenced directly, the two lgammas (about r log r each) keep none of its digits at
// r = 1e15, so above r = 1e3 it comes from Stirling's series.
double gamma_ratio(double y, double r, double* d_log_r = nullptr);

}  // namespace vbagg
