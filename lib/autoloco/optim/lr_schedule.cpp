// The inner learning-rate schedule (see lr_schedule.hpp for the formulas).
#include "autoloco/optim/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

constexpr double kPi = 3.14159265358979323846;

double cosine(const InnerConfig& c, int64_t step, int64_t total_steps) {
  const double min_lr = c.min_lr_ratio * c.lr;
  // A run no longer than its warm-up has no decay phase; guard the division anyway.
  const auto span = static_cast<double>(std::max<int64_t>(1, total_steps - c.warmup_steps));
  const double progress = std::clamp(static_cast<double>(step - c.warmup_steps) / span, 0.0, 1.0);
  return min_lr + (c.lr - min_lr) * 0.5 * (1.0 + std::cos(kPi * progress));
}

}  // namespace

double inner_lr(const InnerConfig& c, int64_t step, int64_t total_steps) {
  if (step < c.warmup_steps) {
    return c.lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup_steps);
  }
  if (c.schedule == "constant") return c.lr;
  if (c.schedule == "cosine") return cosine(c, step, total_steps);
  throw ConfigError("inner.schedule: unknown schedule '" + c.schedule +
                    "' (use cosine or constant)");
}

}  // namespace autoloco
