# Finds the external packages (all from the system or a user prefix; no vendored sources).
# Torch: LibTorch 2.x, by default the pinned torch==2.11.0 wheel that scripts/torch-cuda.sh
# installs (found below without any setting); any other LibTorch 2.x through CMAKE_PREFIX_PATH
# (an unpacked libtorch, or the wheel's `torch.utils.cmake_prefix_path`) or AUTOLOCO_TORCH_PREFIX.
find_package(Threads REQUIRED)
find_package(MPI REQUIRED COMPONENTS C)
find_package(HDF5 REQUIRED COMPONENTS C)
find_package(ZLIB REQUIRED)  # crc32 of checkpoint datasets (HDF5 depends on it already)
find_package(yaml-cpp REQUIRED)
find_package(fmt REQUIRED)

# The torch wheel's CMake config looks for CUDA itself when torch was built with it. Its
# caffe2::mkl target would add -L/-rpath for an unset MKL_ROOT (MKL is static in the wheel).
if(NOT TARGET caffe2::mkl)
  add_library(caffe2::mkl INTERFACE IMPORTED)
endif()
# Without a list, torch's config probes for a GPU to choose the architectures, and warns on a
# machine without one; 9.0 is the H100/H200 the GPU path is built for (override as usual).
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST 9.0 CACHE STRING "CUDA architectures for torch's CMake config")
endif()
# Where scripts/torch-cuda.sh puts the pinned wheel: searched after CMAKE_PREFIX_PATH and before
# the system, so that a LibTorch of the system's (Debian's 1.13) is not taken by default.
set(_autoloco_torch_venv "$ENV{AUTOLOCO_TORCH_VENV}")
if(NOT _autoloco_torch_venv)
  set(_autoloco_torch_venv "$ENV{HOME}/.cache/autoloco/torch-2.11.0")
endif()
file(GLOB _autoloco_torch_hints "${_autoloco_torch_venv}/lib/python3*/site-packages/torch")
find_package(Torch REQUIRED HINTS $ENV{AUTOLOCO_TORCH_PREFIX} ${_autoloco_torch_hints})
if(NOT DEFINED Torch_VERSION AND DEFINED TORCH_VERSION)
  set(Torch_VERSION ${TORCH_VERSION})
endif()
if(NOT Torch_VERSION OR Torch_VERSION VERSION_LESS 2.0)
  message(FATAL_ERROR "autoloco needs LibTorch 2.x; found LibTorch '${Torch_VERSION}' at "
                      "${Torch_DIR}. Get the pinned 2.11 with scripts/torch-cuda.sh (it prints "
                      "its CMake prefix; CMake then finds it by itself), or point "
                      "CMAKE_PREFIX_PATH at an unpacked LibTorch 2.x, and configure again in a "
                      "fresh build directory (or with -UTorch_DIR).")
endif()

set(AUTOLOCO_HAVE_CUDA OFF)
if(NOT AUTOLOCO_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME
            PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_HOME
               PATH_SUFFIXES lib lib64)
  # The CUDA paths use LibTorch's CUDA runtime (c10::cuda streams), so they need a LibTorch built
  # with CUDA, whose config sets TORCH_CUDA_LIBRARIES; a CPU LibTorch cannot run them.
  if(CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY AND TORCH_CUDA_LIBRARIES)
    set(AUTOLOCO_HAVE_CUDA ON)
    add_library(autoloco_nccl INTERFACE)
    target_include_directories(autoloco_nccl SYSTEM INTERFACE ${NCCL_INCLUDE_DIR})
    target_link_libraries(autoloco_nccl INTERFACE ${NCCL_LIBRARY} CUDA::cudart)
  elseif(AUTOLOCO_CUDA STREQUAL "ON")
    message(FATAL_ERROR "AUTOLOCO_CUDA=ON but CUDA (${CUDAToolkit_FOUND}), NCCL "
                        "(${NCCL_INCLUDE_DIR}, ${NCCL_LIBRARY}) or a LibTorch built with CUDA "
                        "(${TORCH_LIBRARIES}) was not found; set CUDAToolkit_ROOT or NCCL_HOME, "
                        "point CMAKE_PREFIX_PATH at a CUDA LibTorch (scripts/torch-cuda.sh), or "
                        "configure with -DAUTOLOCO_CUDA=OFF")
  endif()
endif()

# SentencePiece (Debian's libsentencepiece-dev): autoloco-prepare's subword tokenizer. Optional, so
# that a GPU machine without it still builds the trainer; prepare the data on a machine with it.
set(AUTOLOCO_HAVE_SENTENCEPIECE OFF)
if(NOT AUTOLOCO_SENTENCEPIECE STREQUAL "OFF")
  find_path(SENTENCEPIECE_INCLUDE_DIR sentencepiece_processor.h)
  find_library(SENTENCEPIECE_LIBRARY sentencepiece)
  find_library(SENTENCEPIECE_TRAIN_LIBRARY sentencepiece_train)
  if(SENTENCEPIECE_INCLUDE_DIR AND SENTENCEPIECE_LIBRARY AND SENTENCEPIECE_TRAIN_LIBRARY)
    set(AUTOLOCO_HAVE_SENTENCEPIECE ON)
  elseif(AUTOLOCO_SENTENCEPIECE STREQUAL "ON")
    message(FATAL_ERROR "AUTOLOCO_SENTENCEPIECE=ON but SentencePiece was not found (header "
                        "${SENTENCEPIECE_INCLUDE_DIR}, libraries ${SENTENCEPIECE_LIBRARY} "
                        "${SENTENCEPIECE_TRAIN_LIBRARY}); install libsentencepiece-dev "
                        "(scripts/setup.sh) or configure with -DAUTOLOCO_SENTENCEPIECE=OFF")
  endif()
endif()

# The readers of shipped corpora (autoloco-prepare): zstd and RapidJSON (header-only) from Debian
# (libzstd-dev, rapidjson-dev); gzip is zlib's.
find_package(zstd REQUIRED)
find_path(RAPIDJSON_INCLUDE_DIR rapidjson/document.h)
if(NOT RAPIDJSON_INCLUDE_DIR)
  message(FATAL_ERROR "RapidJSON (rapidjson/document.h) was not found: install rapidjson-dev "
                      "(scripts/setup.sh does) or set RAPIDJSON_INCLUDE_DIR")
endif()
add_library(autoloco_rapidjson INTERFACE)
target_include_directories(autoloco_rapidjson SYSTEM INTERFACE ${RAPIDJSON_INCLUDE_DIR})

include(AutolocoParquet)

if(AUTOLOCO_BUILD_TESTS)
  find_package(Catch2 REQUIRED)
  include(Catch)
endif()
