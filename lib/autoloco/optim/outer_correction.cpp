#include "autoloco/optim/outer_correction.hpp"

#include <fmt/format.h>

#include <cmath>

#include "autoloco/util/error.hpp"

namespace autoloco {

CorrectionMode parse_correction_mode(const std::string& name) {
  if (name == "none") return CorrectionMode::none;
  if (name == "momentum") return CorrectionMode::momentum;
  if (name == "lr") return CorrectionMode::lr;
  if (name == "both") return CorrectionMode::both;
  throw ConfigError(fmt::format(
      "config key outer.correction: '{}' is not one of: none, momentum, lr, both", name));
}

OuterStep corrected_step(const OuterCorrection& c, double momentum, double lr, int64_t H) {
  // r = S_k / (H_0 η̄_k) with η̄_k = S_k / H_k is H_k / H_0; computed from the steps so that a
  // round whose inner lr is 0 (the first step of a warm-up) is not a 0/0.
  const double r = static_cast<double>(H) / static_cast<double>(c.H0);
  // r == 1 returns the configured values untouched: every mode is DiLoCo bit for bit at H_0.
  if (c.mode == CorrectionMode::none || r == 1.0) return {momentum, lr};
  switch (c.mode) {
    case CorrectionMode::momentum:
      return {std::pow(momentum, r), lr};
    case CorrectionMode::lr:
      return {momentum, lr * std::pow(r, c.beta)};
    case CorrectionMode::both: {
      const double mu = std::pow(momentum, r);
      return {mu, momentum < 1.0 ? lr * (1.0 - mu) / (1.0 - momentum) : lr};
    }
    case CorrectionMode::none:
      break;
  }
  return {momentum, lr};
}

}  // namespace autoloco
