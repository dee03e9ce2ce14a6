#include "autoloco/optim/fragment_plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

// "blocks.<b>.…" -> b.
std::optional<int64_t> block_of(const std::string& name) {
  const std::string prefix = "blocks.";
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  char* end = nullptr;
  const long long b = std::strtoll(name.c_str() + prefix.size(), &end, 10);
  if (end == name.c_str() + prefix.size() || *end != '.') return std::nullopt;
  return b;
}

int64_t row_numel(const ParamSlice& s) {
  if (s.shape.size() < 2) return s.numel;  // a vector moves whole
  return s.numel / s.shape[0];
}

void add_range(Fragment& f, int64_t offset, int64_t numel) {
  if (numel > 0) f.ranges.push_back({offset, numel});
  f.numel += numel;
}

void finish(Fragment& f) {
  std::sort(f.ranges.begin(), f.ranges.end(),
            [](const FlatRange& a, const FlatRange& b) { return a.offset < b.offset; });
  std::vector<FlatRange> merged;
  for (const FlatRange& r : f.ranges) {
    if (!merged.empty() && merged.back().offset + merged.back().numel == r.offset) {
      merged.back().numel += r.numel;
    } else {
      merged.push_back(r);
    }
  }
  f.ranges = std::move(merged);
  std::sort(f.blocks.begin(), f.blocks.end());
  f.blocks.erase(std::unique(f.blocks.begin(), f.blocks.end()), f.blocks.end());
}

// Water-filling: how many more elements each fragment takes so that the lightest ones rise to
// one common level, `extra` elements in all.
std::vector<double> quotas(const std::vector<int64_t>& loads, int64_t extra) {
  std::vector<int64_t> sorted = loads;
  std::sort(sorted.begin(), sorted.end());
  double level = 0.0;
  double filled = 0.0;  // elements below `level` in the first i fragments
  size_t i = 0;
  for (; i < sorted.size(); ++i) {
    const double next = static_cast<double>(sorted[i]);
    const double needed = filled + static_cast<double>(i) * (next - level);
    if (i > 0 && needed >= static_cast<double>(extra)) break;
    filled = needed;
    level = next;
  }
  level += (static_cast<double>(extra) - filled) / static_cast<double>(i);
  std::vector<double> q;
  for (const int64_t load : loads)
    q.push_back(std::max(0.0, level - static_cast<double>(load)));
  return q;
}

std::string row_span(const ParamSlice& s, int64_t first, int64_t count) {
  const std::string base = s.name.substr(0, s.name.rfind('.'));
  if (s.shape.size() < 2 || count * row_numel(s) == s.numel) return base;
  return fmt::format("{} rows {}-{}", base, first, first + count - 1);
}

}  // namespace

FragmentPlan::FragmentPlan(int64_t numel) : numel_(numel) {
  Fragment f;
  add_range(f, 0, numel);
  f.extra.push_back("all parameters");
  fragments_.push_back(std::move(f));
}

FragmentPlan::FragmentPlan(const std::vector<ParamSlice>& slices, int64_t fragments) {
  if (fragments < 1) {
    throw ConfigError(
        fmt::format("config key outer.fragments: must be at least 1, got {}", fragments));
  }
  const auto P = static_cast<size_t>(fragments);
  fragments_.resize(P);
  std::vector<const ParamSlice*> others;
  for (const ParamSlice& s : slices) {
    numel_ += s.numel;
    if (const auto b = block_of(s.name)) {
      Fragment& f = fragments_[static_cast<size_t>(*b) % P];
      add_range(f, s.offset, s.numel);
      f.blocks.push_back(*b);
    } else {
      others.push_back(&s);
    }
  }
  std::vector<int64_t> loads;
  int64_t extra = 0;
  for (const Fragment& f : fragments_)
    loads.push_back(f.numel);
  for (const ParamSlice* s : others)
    extra += s->numel;
  // Fill the quotas in fragment order, whole rows at a time; cumulative rounding keeps the
  // running total on target, and the last fragment with a quota takes what is left.
  const std::vector<double> q = quotas(loads, extra);
  std::vector<size_t> takers;
  for (size_t p = 0; p < P; ++p) {
    if (q[p] > 0.0) takers.push_back(p);
  }
  size_t t = 0;
  double due = takers.empty() ? 0.0 : q[takers[0]];  // cumulative quota up to taker t
  int64_t placed = 0;
  for (const ParamSlice* s : others) {
    const int64_t row = row_numel(*s);
    int64_t row0 = 0;
    const int64_t rows = s->numel / row;
    while (row0 < rows) {
      int64_t take = rows - row0;
      if (t + 1 < takers.size()) {
        const double room = due - static_cast<double>(placed);
        take = std::clamp<int64_t>(std::llround(room / static_cast<double>(row)), 0, rows - row0);
      }
      if (take > 0) {
        Fragment& f = fragments_[takers[t]];
        add_range(f, s->offset + row0 * row, take * row);
        // A module's weight and bias are one entry ("ln_f").
        const std::string part = row_span(*s, row0, take);
        if (f.extra.empty() || f.extra.back() != part) f.extra.push_back(part);
        placed += take * row;
        row0 += take;
      }
      if (row0 < rows) due += q[takers[++t]];
    }
  }
  for (size_t p = 0; p < P; ++p) {
    finish(fragments_[p]);
    if (fragments_[p].numel == 0) {
      throw ConfigError(fmt::format(
          "config key outer.fragments: the model's parameters cannot fill {} fragments (fragment "
          "{} would be empty); use fewer fragments, e.g. at most model.n_layer",
          P, p));
    }
  }
}

torch::Tensor FragmentPlan::gather(const torch::Tensor& flat, size_t p) const {
  return gather(flat, p, 0, fragments_[p].numel);
}

void FragmentPlan::scatter(const torch::Tensor& part, size_t p, torch::Tensor& flat) const {
  scatter(part, p, 0, flat);
}

void FragmentPlan::mix(const torch::Tensor& part, size_t p, double alpha,
                       torch::Tensor& flat) const {
  mix(part, p, 0, alpha, flat);
}

std::vector<FlatRange> FragmentPlan::ranges(size_t p, int64_t begin, int64_t count) const {
  std::vector<FlatRange> out;
  int64_t at = 0;  // where range r starts in the fragment's vector
  for (const FlatRange& r : fragments_[p].ranges) {
    const int64_t lo = std::max(begin, at);
    const int64_t hi = std::min(begin + count, at + r.numel);
    if (lo < hi) out.push_back({r.offset + (lo - at), hi - lo});
    at += r.numel;
  }
  return out;
}

torch::Tensor FragmentPlan::gather(const torch::Tensor& flat, size_t p, int64_t begin,
                                   int64_t count) const {
  const std::vector<FlatRange> rs = ranges(p, begin, count);
  if (rs.size() == 1) return flat.narrow(0, rs[0].offset, rs[0].numel);
  if (rs.empty()) return flat.narrow(0, 0, 0);
  std::vector<torch::Tensor> parts;
  for (const FlatRange& r : rs)
    parts.push_back(flat.narrow(0, r.offset, r.numel));
  return torch::cat(parts);
}

void FragmentPlan::scatter(const torch::Tensor& part, size_t p, int64_t begin,
                           torch::Tensor& flat) const {
  torch::NoGradGuard no_grad;
  int64_t at = 0;
  for (const FlatRange& r : ranges(p, begin, part.numel())) {
    flat.narrow(0, r.offset, r.numel).copy_(part.narrow(0, at, r.numel));
    at += r.numel;
  }
}

void FragmentPlan::mix(const torch::Tensor& part, size_t p, int64_t begin, double alpha,
                       torch::Tensor& flat) const {
  torch::NoGradGuard no_grad;
  int64_t at = 0;
  for (const FlatRange& r : ranges(p, begin, part.numel())) {
    flat.narrow(0, r.offset, r.numel).mul_(alpha).add_(part.narrow(0, at, r.numel), 1.0 - alpha);
    at += r.numel;
  }
}

std::vector<std::string> FragmentPlan::describe() const {
  std::vector<std::string> lines;
  for (size_t p = 0; p < fragments_.size(); ++p) {
    const Fragment& f = fragments_[p];
    std::vector<std::string> parts;
    if (!f.blocks.empty()) parts.push_back(fmt::format("blocks {}", fmt::join(f.blocks, ",")));
    parts.insert(parts.end(), f.extra.begin(), f.extra.end());
    lines.push_back(fmt::format(
        "fragment {}: {} | {} parameters ({:.1f}%) in {} ranges", p, fmt::join(parts, " + "),
        f.numel,
        100.0 * static_cast<double>(f.numel) / static_cast<double>(std::max<int64_t>(1, numel_)),
        f.ranges.size()));
  }
  return lines;
}

}  // namespace autoloco
