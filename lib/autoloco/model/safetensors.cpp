// The LibTorch side of safetensors: dtypes mapped both ways, tensors handed to the writer without
// copying those already in the format's layout, and tensors read into fresh CPU memory.
#include "autoloco/model/safetensors.hpp"

#include <fmt/format.h>

#include <array>

#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

struct DtypePair {
  SafetensorsDtype safetensors;
  torch::ScalarType torch;
};

// The types both sides have (LibTorch 1.13 has no unsigned type but uint8, and no float8).
constexpr std::array<DtypePair, 10> kPairs = {{
    {SafetensorsDtype::BOOL, torch::kBool},
    {SafetensorsDtype::U8, torch::kUInt8},
    {SafetensorsDtype::I8, torch::kInt8},
    {SafetensorsDtype::I16, torch::kInt16},
    {SafetensorsDtype::F16, torch::kFloat16},
    {SafetensorsDtype::BF16, torch::kBFloat16},
    {SafetensorsDtype::I32, torch::kInt32},
    {SafetensorsDtype::F32, torch::kFloat32},
    {SafetensorsDtype::F64, torch::kFloat64},
    {SafetensorsDtype::I64, torch::kInt64},
}};

SafetensorsBlob blob_of(const std::string& name, const torch::Tensor& tensor,
                        const std::string& path) {
  if (!tensor.defined()) {
    throw CheckpointError(
        fmt::format("cannot write tensor '{}' to '{}': it is undefined", name, path));
  }
  const std::optional<SafetensorsDtype> dtype = safetensors_dtype(tensor.scalar_type());
  if (!dtype) {
    throw CheckpointError(
        fmt::format("cannot write tensor '{}' to '{}': safetensors has no "
                    "dtype for {}",
                    name, path, c10::toString(tensor.scalar_type())));
  }
  SafetensorsBlob blob;
  blob.name = name;
  blob.dtype = *dtype;
  blob.shape = tensor.sizes().vec();
  if (tensor.device().is_cpu() && tensor.is_contiguous()) {
    blob.data = tensor.data_ptr();
  } else {
    // Copied into the writer's buffer only when the tensor's turn comes: one tensor at a time.
    blob.fill = [tensor](void* out) {
      torch::NoGradGuard no_grad;
      torch::from_blob(out, tensor.sizes(), tensor.options().device(torch::kCPU))
          .copy_(tensor.detach());
    };
  }
  return blob;
}

torch::Tensor read_entry(const SafetensorsReader& file, const SafetensorsEntry& entry,
                         std::optional<torch::ScalarType> dtype) {
  const std::optional<torch::ScalarType> stored = torch_dtype(entry.dtype);
  if (!stored) {
    throw CheckpointError(
        fmt::format("cannot read tensor '{}' of '{}': LibTorch has no dtype "
                    "for {}",
                    entry.name, file.path(), dtype_name(entry.dtype)));
  }
  torch::Tensor tensor = torch::empty(entry.shape, torch::TensorOptions().dtype(*stored));
  file.read_bytes(entry, tensor.data_ptr());
  if (*stored == torch::kBool) {
    // A bool that is neither 0 nor 1 is undefined behaviour in C++ and in LibTorch's kernels.
    tensor = tensor.view(torch::kUInt8).ne(0);
  }
  return dtype && *dtype != *stored ? tensor.to(*dtype) : tensor;
}

}  // namespace

std::optional<SafetensorsDtype> safetensors_dtype(torch::ScalarType dtype) {
  for (const DtypePair& p : kPairs) {
    if (p.torch == dtype) return p.safetensors;
  }
  return std::nullopt;
}

std::optional<torch::ScalarType> torch_dtype(SafetensorsDtype dtype) {
  for (const DtypePair& p : kPairs) {
    if (p.safetensors == dtype) return p.torch;
  }
  return std::nullopt;
}

std::vector<SafetensorsBlob> safetensors_blobs(const NamedTensors& tensors,
                                               const std::string& path) {
  std::vector<SafetensorsBlob> blobs;
  blobs.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors)
    blobs.push_back(blob_of(name, tensor, path));
  return blobs;
}

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_safetensors_file(path, safetensors_blobs(tensors, path), metadata);
}

std::vector<std::string> save_safetensors(const std::string& dir, const NamedTensors& tensors,
                                          uint64_t max_shard_bytes) {
  return save_safetensors_dir(dir, safetensors_blobs(tensors, dir), max_shard_bytes);
}

torch::Tensor read_tensor(const SafetensorsReader& file, const std::string& name,
                          std::optional<torch::ScalarType> dtype) {
  return read_entry(file, file.entry(name), dtype);
}

torch::Tensor read_tensor(const SafetensorsDir& dir, const std::string& name,
                          std::optional<torch::ScalarType> dtype) {
  const SafetensorsLocation where = dir.locate(name);
  return read_entry(*where.file, *where.entry, dtype);
}

}  // namespace autoloco
