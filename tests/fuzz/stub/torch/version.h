// Stand-in for LibTorch's torch/version.h in the fuzz build (tests/fuzz), used only where no
// LibTorch headers are found: config/validate.cpp needs the version for one message and one
// check (inner.adamw: fused needs LibTorch 2.x), and nothing else of LibTorch.
#pragma once

#define TORCH_VERSION_MAJOR 1
#define TORCH_VERSION_MINOR 13
#define TORCH_VERSION_PATCH 0
#define TORCH_VERSION "1.13.0 (fuzz build stand-in)"
