// What the Trainer's checkpoint writer, its loader and its resume share (trainer_checkpoint.cpp,
// trainer_load.cpp, trainer_resume.cpp): the model's identity and each instance's dataset prefix,
// spelled alike on both sides, two reads of a checkpoint that the check and the load make, and
// the write of a tensor.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <utility>

#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/ckpt/manifest.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {

// One line per parameter: "name shape offset", the model's identity in a checkpoint.
inline std::string param_table(const FlatParams& params) {
  std::string out;
  for (const ParamSlice& s : params.slices()) {
    out += fmt::format("{} [{}] {}\n", s.name, fmt::join(s.shape, ","), s.offset);
  }
  return out;
}

// The first line where two param_tables differ, said for a user ("" when they are equal): the
// saved one is a checkpoint's (or a heal source's), `now` this run's.
inline std::string first_difference(const std::string& saved, const std::string& now) {
  std::istringstream a(saved), b(now);
  std::string la, lb;
  while (true) {
    const bool more_a = static_cast<bool>(std::getline(a, la));
    const bool more_b = static_cast<bool>(std::getline(b, lb));
    if (!more_a && !more_b) return "";
    if (!more_a) return fmt::format("this model has '{}' which the checkpoint lacks", lb);
    if (!more_b) return fmt::format("the checkpoint has '{}' which this model lacks", la);
    if (la != lb) return fmt::format("the checkpoint has '{}' where this model has '{}'", la, lb);
  }
}

// Datasets of model instance `id` (batch.instances > 1): instance 0 keeps the names of a run
// without instances.
inline std::string instance_prefix(int id) {
  return id == 0 ? std::string() : fmt::format("instance_{}/", id);
}

inline const ManifestFile& manifest_entry(const Manifest& m, const std::string& path,
                                          const std::string& name) {
  const ManifestFile* f = m.find(name);
  if (!f) {
    throw CheckpointError(fmt::format("'{}': the manifest lists no file {}", path, name));
  }
  return *f;
}

// A tensor's values as one flat contiguous host tensor, and written as a float32 dataset.
inline torch::Tensor host_flat(const torch::Tensor& t) {
  return t.detach().to(torch::kCPU).contiguous().reshape({-1});
}
inline void write_tensor(H5Writer& w, const std::string& name, const torch::Tensor& t) {
  const torch::Tensor host = host_flat(t);
  w.write(name, host.data_ptr<float>(), {host.numel()});
}

// The progress clock's base (step, tokens) at the last topology change; none before one.
inline std::pair<int64_t, int64_t> progress_base(const H5Reader& g) {
  if (!g.has("counters/progress_base_step")) return {0, 0};
  return {g.read_int("counters/progress_base_step"), g.read_int("counters/progress_base_tokens")};
}

}  // namespace autoloco
