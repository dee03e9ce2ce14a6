// Streaming DiLoCo's fragments (Douillard et al. 2025, arXiv 2501.18512; ALGORITHMS.md §4): the
// parameter table split into outer.fragments groups, each synced on its own staggered schedule
// so that about |θ|/P is on the link at a time. Whole transformer blocks are strided over the
// fragments (block b in fragment b mod P), as in the paper; the parameters outside the blocks
// (embeddings, which the head shares, and the final norm) then fill the fragments that the
// blocks left lightest, split at row boundaries where that keeps the fragments near |θ|/P. The
// outer step is elementwise, so any split of the elements is the same algorithm; only the
// schedule differs. docs/methods.md (Fragments) gives the assignment.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "autoloco/optim/flat_params.hpp"
#include "autoloco/util/flat_range.hpp"

namespace autoloco {

struct Fragment {
  std::vector<FlatRange> ranges;  // ascending, adjacent ones merged
  int64_t numel = 0;
  std::vector<int64_t> blocks;     // transformer blocks it holds, ascending
  std::vector<std::string> extra;  // what else: "wte rows 0-511", "ln_f"
};

class FragmentPlan {
 public:
  // One fragment holding everything (outer.fragments = 1).
  explicit FragmentPlan(int64_t numel);
  // `fragments` fragments over the parameters that `slices` (FlatParams::slices()) lays out;
  // names "blocks.<b>.…" belong to block b. Throws ConfigError (outer.fragments) when a fragment
  // would be empty.
  FragmentPlan(const std::vector<ParamSlice>& slices, int64_t fragments);

  size_t size() const { return fragments_.size(); }
  const Fragment& operator[](size_t p) const { return fragments_[p]; }
  int64_t numel() const { return numel_; }
  // The plan is a single fragment of the whole buffer: gather and scatter are plain copies.
  bool whole() const { return fragments_.size() == 1; }

  // Fragment p's elements of `flat`, in range order: a view of `flat` when they are one range,
  // else a new contiguous tensor.
  torch::Tensor gather(const torch::Tensor& flat, size_t p) const;
  // flat[fragment p] = part (part as gather returns it).
  void scatter(const torch::Tensor& part, size_t p, torch::Tensor& flat) const;
  // flat[fragment p] = alpha flat[fragment p] + (1 − alpha) part.
  void mix(const torch::Tensor& part, size_t p, double alpha, torch::Tensor& flat) const;

  // The same on elements [begin, begin + count) of fragment p's vector (one member's shard of
  // it, topology.shard): `part` holds those count elements.
  std::vector<FlatRange> ranges(size_t p, int64_t begin, int64_t count) const;
  torch::Tensor gather(const torch::Tensor& flat, size_t p, int64_t begin, int64_t count) const;
  void scatter(const torch::Tensor& part, size_t p, int64_t begin, torch::Tensor& flat) const;
  void mix(const torch::Tensor& part, size_t p, int64_t begin, double alpha,
           torch::Tensor& flat) const;

  // One line per fragment for the start log: what it holds and its share of the parameters.
  std::vector<std::string> describe() const;

 private:
  std::vector<Fragment> fragments_;
  int64_t numel_ = 0;
};

}  // namespace autoloco
