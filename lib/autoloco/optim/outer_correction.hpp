// AutoLoCo's outer correction (ALGORITHMS.md §2): a round of H_k inner steps moves the replicas
// r_k = S_k / (H_0 · η̄_k) = H_k / H_0 times as far as a reference round of H_0 steps at the same
// inner learning rates, so the outer momentum and learning rate are adjusted by r_k. Every mode is
// plain DiLoCo when H_k = H_0, whatever the inner lr schedule.
#pragma once

#include <cstdint>
#include <string>

namespace autoloco {

enum class CorrectionMode { none, momentum, lr, both };

// Throws ConfigError naming outer.correction for an unknown name.
CorrectionMode parse_correction_mode(const std::string& name);

struct OuterCorrection {
  CorrectionMode mode = CorrectionMode::none;
  double beta = 0.5;  // exponent of r in mode lr
  int64_t H0 = 1;     // the reference interval (interval.H)
};

// The outer step of one round: momentum and learning rate.
struct OuterStep {
  double momentum = 0.0;
  double lr = 0.0;
};

// The step for a round of H inner steps, from the configured (scheduled) momentum and lr:
//   none:     mu,          lr
//   momentum: mu^r,        lr
//   lr:       mu,          lr r^beta
//   both:     mu^r,        lr (1 − mu^r) / (1 − mu)   (the steady-state gain lr/(1 − mu) kept)
OuterStep corrected_step(const OuterCorrection& c, double momentum, double lr, int64_t H);

}  // namespace autoloco
