#include "autoloco/metrics/progress.hpp"

#include <fmt/format.h>

#include <cmath>

namespace autoloco {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string format_si(double value) {
  const double a = std::fabs(value);
  if (a >= 1e9) return fmt::format("{:.2f}G", value / 1e9);
  if (a >= 1e6) return fmt::format("{:.2f}M", value / 1e6);
  if (a >= 1e3) return fmt::format("{:.1f}k", value / 1e3);
  return fmt::format("{:.0f}", value);
}

std::string format_progress(const ProgressState& s) {
  const double remaining =
      s.step > 0 ? s.elapsed_s * static_cast<double>(s.total - s.step) / static_cast<double>(s.step)
                 : std::nan("");
  const int width = static_cast<int>(std::to_string(s.total).size());
  std::string line = fmt::format("step {:>{}}/{} | loss {:.4f} | lr {:.2e} | {} tok/s", s.step,
                                 width, s.total, s.loss, s.lr, format_si(s.tokens_per_s));
  if (s.dcs > 1) {
    line += fmt::format(" | round {} | sent {}B", s.rounds,
                        format_si(static_cast<double>(s.inter_dc_bytes)));
  }
  return line + " | ETA " + format_duration(remaining);
}

}  // namespace autoloco
