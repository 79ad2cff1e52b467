// Counter-based standard normals: each is a pure function of its key, so draws do not depend on
// the thread that makes them or on the order bags are visited (the sampled expectation, MODEL.md
// 4e ii).
#pragma once

#include <cmath>
#include <cstdint>

namespace vbagg {

// SplitMix64's finaliser: a bijective mix of 64 bits.
inline std::uint64_t mix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A uniform in (0, 1) from 53 bits of the mixed key.
inline double counter_uniform(std::uint64_t key) {
  return (static_cast<double>(mix64(key) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// The key of the stream (seed, step, bag).
inline std::uint64_t counter_stream(std::uint64_t seed, std::uint64_t step, std::uint64_t bag) {
  return mix64(mix64(mix64(seed) ^ step) ^ bag);
}

// The standard normal number `index` of the stream (seed, step, bag), by Box-Muller on two
// uniforms of the stream.
inline double counter_normal(std::uint64_t seed, std::uint64_t step, std::uint64_t bag, std::uint64_t index) {
  const std::uint64_t stream = counter_stream(seed, step, bag);
  const double u1 = counter_uniform(stream ^ (2 * index)), u2 = counter_uniform(stream ^ (2 * index + 1));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

// The first n standard normals of a stream into out, two from each pair of uniforms (Box-Muller's
// cosine and sine): half the work of n counter_normal calls, for many draws per key.
inline void stream_normals(std::uint64_t stream, std::int64_t n, double* out) {
  for (std::int64_t j = 0; 2 * j < n; ++j) {
    const auto k = static_cast<std::uint64_t>(j);
    const double r = std::sqrt(-2.0 * std::log(counter_uniform(stream ^ (2 * k)))),
                 a = 2.0 * M_PI * counter_uniform(stream ^ (2 * k + 1));
    out[2 * j] = r * std::cos(a);
    if (2 * j + 1 < n) out[2 * j + 1] = r * std::sin(a);
  }
}

}  // namespace vbagg
