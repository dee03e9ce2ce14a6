#!/usr/bin/env bash
# offline-check.sh: prove that an offline prefix (scripts/offline-install.sh) is all autoloco's
# build needs besides LibTorch, on a machine that has the same packages installed system-wide
# (which would mask a mistake): in a private mount namespace (unshare, as root) it hides the
# system's copies of Open MPI, PMIx, hwloc, HDF5, yaml-cpp, fmt, Catch2 and the zlib headers
# (empty tmpfs over their directories, an empty file over each of their other files), then, with
# PREFIX/env.sh sourced:
#   1. builds a tiny MPI program with the prefix's mpicc and runs it with mpiexec -n 2, printing
#      which shared libraries it loaded from outside the prefix;
#   2. configures autoloco with CMake into a scratch folder, LibTorch from the torch 2.11 wheel
#      (scripts/torch-cuda.sh), /usr ignored, CUDA off, and checks in CMakeCache.txt that MPI,
#      HDF5, ZLIB, yaml-cpp, fmt and Catch2 were found under PREFIX;
#   3. compiles the project's translation units that include hdf5.h, zlib.h, mpi.h and
#      yaml-cpp (ckpt/h5_file, ckpt/crc32, comm/mpi_communicator, config/config): the whole of
#      autoloco::core takes about half an hour on 2 cores, too long for a check;
#   4. builds, with the project's own AutolocoDependencies.cmake, a small program that links
#      MPI, HDF5, yaml-cpp, fmt and zlib and uses each, and runs it on 2 ranks; and a Catch2 test.
# Without unshare or root it says so and runs the same checks with the system copies visible.
#
# Usage:
#   scripts/offline-check.sh [PREFIX]          PREFIX default: <repo>/.offline-prefix
#
# Environment:
#   AUTOLOCO_TORCH_PREFIX          LibTorch's CMake prefix (default: scripts/torch-cuda.sh | tail -1)
#   AUTOLOCO_OFFLINE_CHECK_DIR     scratch folder (default: ${TMPDIR:-/tmp}/autoloco-offline-check),
#                                  emptied first
#   AUTOLOCO_OFFLINE_CHECK_TARGET  also build this project target in full and run it with --help
#                                  (e.g. autoloco-prepare; about 30 minutes on 2 cores)
#   AUTOLOCO_OFFLINE_CHECK_NO_NAMESPACE=1  do not hide the system's copies (as without root)
#   AUTOLOCO_OFFLINE_CHECK_INNER   internal: set when the script runs itself inside the namespace
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
self="$repo/scripts/$(basename "$0")"
log() { printf 'offline-check: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}
[[ "${1:-}" == -h || "${1:-}" == --help ]] && {
  sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"
  exit 0
}
prefix=${1:-$repo/.offline-prefix}
[[ -f "$prefix/env.sh" ]] || die "$prefix/env.sh not found: run scripts/offline-install.sh BUNDLE_DIR $prefix first"
prefix=$(cd "$prefix" && pwd -P)
work=${AUTOLOCO_OFFLINE_CHECK_DIR:-${TMPDIR:-/tmp}/autoloco-offline-check}
readonly ARCH_LIB=/usr/lib/x86_64-linux-gnu

# --- outside the namespace: find LibTorch, then enter it --------------------------------------
if [[ -z "${AUTOLOCO_OFFLINE_CHECK_INNER:-}" ]]; then
  if [[ -z "${AUTOLOCO_TORCH_PREFIX:-}" ]]; then
    log "finding LibTorch with scripts/torch-cuda.sh"
    AUTOLOCO_TORCH_PREFIX=$("$repo/scripts/torch-cuda.sh" | tail -n 1) ||
      die "scripts/torch-cuda.sh failed; set AUTOLOCO_TORCH_PREFIX to a LibTorch CMake prefix"
  fi
  [[ -d "$AUTOLOCO_TORCH_PREFIX/share/cmake/Torch" ]] ||
    die "no share/cmake/Torch under AUTOLOCO_TORCH_PREFIX=$AUTOLOCO_TORCH_PREFIX"
  export AUTOLOCO_TORCH_PREFIX
  if [[ "${AUTOLOCO_OFFLINE_CHECK_NO_NAMESPACE:-0}" != 1 && $(id -u) -eq 0 ]] &&
    command -v unshare >/dev/null 2>&1 &&
    unshare -m --propagation private true 2>/dev/null; then
    AUTOLOCO_OFFLINE_CHECK_INNER=hide exec unshare -m --propagation private "$self" "$prefix"
  fi
  log "WARNING: no private mount namespace (it needs root and unshare; or AUTOLOCO_OFFLINE_CHECK_NO_NAMESPACE=1):"
  log "WARNING: the checks run with the system's copies visible, so a pass proves less"
  export AUTOLOCO_OFFLINE_CHECK_INNER=visible
fi

rm -rf "$work"
mkdir -p "$work"

# --- hide the system's copies -------------------------------------------------------------------
hidden_dirs=0
hidden_files=0
if [[ "$AUTOLOCO_OFFLINE_CHECK_INNER" == hide ]]; then
  dirs=(/usr/include/hdf5 /usr/include/yaml-cpp /usr/include/fmt /usr/include/catch2
    "$ARCH_LIB/openmpi" "$ARCH_LIB/hdf5" "$ARCH_LIB/pmix2" "$ARCH_LIB/hwloc"
    "$ARCH_LIB/cmake/yaml-cpp" "$ARCH_LIB/cmake/fmt" /usr/lib/cmake/Catch2 /usr/share/Catch2
    /usr/share/openmpi /etc/openmpi "$ARCH_LIB/fortran/gfortran-mod-15/openmpi")
  # every other file of the bundle's core and dev packages (and of hdf5-helpers: h5cc) that the
  # system has installed
  mapfile -t pkgs < <(grep -v '^#' "$prefix/.autoloco-offline/packages" 2>/dev/null |
    awk '$3 == "installed" && $4 != "(dep)" {print $1}')
  ((${#pkgs[@]})) || die "$prefix/.autoloco-offline/packages lists no packages: reinstall the prefix"
  files=()
  if command -v dpkg >/dev/null 2>&1; then
    while IFS= read -r f; do
      [[ -f "$f" && ! -L "$f" ]] || continue
      case "$f" in /usr/share/doc/* | /usr/share/man/* | /usr/share/lintian/*) continue ;; esac
      under=0
      for d in "${dirs[@]}"; do [[ "$f" == "$d"/* ]] && under=1; done
      ((under)) || files+=("$f")
    done < <(dpkg -L "${pkgs[@]}" hdf5-helpers 2>/dev/null | sort -u)
  fi
  : >"$work/empty" # mode 0644: executing it fails, loading it fails ("file too short")
  chmod 0644 "$work/empty"
  for d in "${dirs[@]}"; do
    [[ -d "$d" ]] || continue
    mount -t tmpfs -o ro,size=16k autoloco-hidden "$d" || die "cannot mount a tmpfs over $d"
    hidden_dirs=$((hidden_dirs + 1))
  done
  for f in "${files[@]}"; do
    mount --bind "$work/empty" "$f" || die "cannot bind an empty file over $f"
    hidden_files=$((hidden_files + 1))
  done
  log "private mount namespace: hid $hidden_dirs directories and $hidden_files files of the system's copies"
  # sanity: the system's copies are gone
  if [[ -e /usr/bin/mpicc ]] && [[ -s "$(readlink -f /usr/bin/mpicc)" ]]; then
    die "/usr/bin/mpicc still resolves to a non-empty file"
  fi
  [[ ! -s /usr/include/zlib.h ]] || die "/usr/include/zlib.h is still visible"
fi

# --- the prefix's environment ------------------------------------------------------------------
# shellcheck source=/dev/null
. "$prefix/env.sh"
run_args=(-n 2 --oversubscribe)
[[ $(id -u) -eq 0 ]] && run_args+=(--allow-run-as-root)
failures=()

# C source that prints the shared objects a process mapped from outside the prefix.
cat >"$work/outside.h" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void print_outside(const char *prefix) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[4096], seen[8192] = "";
  if (!f) return;
  while (fgets(line, sizeof line, f)) {
    char *p = strchr(line, '/');
    if (!p || !strstr(p, ".so")) continue;
    p[strcspn(p, "\n")] = 0;
    if (strncmp(p, prefix, strlen(prefix)) == 0 || strstr(seen, p)) continue;
    if (strlen(seen) + strlen(p) + 2 < sizeof seen) { strcat(seen, p); strcat(seen, " "); }
  }
  fclose(f);
  printf("  loaded from outside the prefix: %s\n", seen[0] ? seen : "(nothing)");
}
EOF

# --- 1. MPI -------------------------------------------------------------------------------------
cat >"$work/hello.c" <<'EOF'
#include <mpi.h>
#include "outside.h"
int main(int argc, char **argv) {
  int rank, size, sum = 0, one = 1;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("  mpi hello: ranks=%d allreduce=%d\n", size, sum);
    print_outside(getenv("AUTOLOCO_OFFLINE_PREFIX"));
  }
  MPI_Finalize();
  return sum == size ? 0 : 1;
}
EOF
log "1. MPI: $(command -v mpicc) + $(command -v mpiexec) -n 2"
if (cd "$work" && mpicc hello.c -o hello && timeout 120 mpiexec "${run_args[@]}" ./hello); then
  :
else
  failures+=("MPI hello")
fi

# --- 2. configure autoloco ---------------------------------------------------------------------
build=$work/build
log "2. cmake configure of $repo into $build (LibTorch: $AUTOLOCO_TORCH_PREFIX)"
if ! cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$AUTOLOCO_TORCH_PREFIX;$prefix/usr" -DCMAKE_IGNORE_PREFIX_PATH=/usr \
  -DAUTOLOCO_CUDA=OFF >"$work/configure.log" 2>&1; then
  tail -n 30 "$work/configure.log" >&2
  die "cmake configure failed (log: $work/configure.log)"
fi
grep -E '^-- (Found (MPI|HDF5|ZLIB)|autoloco:)' "$work/configure.log" | sed 's/^/  /'
cache() { sed -n "s|^$1:[A-Z]*=||p" "$build/CMakeCache.txt"; }
for v in MPI_C_COMPILER MPI_C_HEADER_DIR MPI_mpi_LIBRARY MPIEXEC_EXECUTABLE HDF5_C_INCLUDE_DIR \
  HDF5_hdf5_LIBRARY_RELEASE ZLIB_INCLUDE_DIR ZLIB_LIBRARY_RELEASE yaml-cpp_DIR fmt_DIR Catch2_DIR; do
  value=$(cache "$v")
  if [[ "$value" == "$prefix"/* ]]; then
    printf '  %-26s %s\n' "$v" "$value"
  else
    printf '  %-26s %s   <-- NOT UNDER %s\n' "$v" "${value:-(unset)}" "$prefix"
    failures+=("$v not under the prefix")
  fi
done

# --- 3. the project's translation units that use the prefix's headers --------------------------
objects=()
for src in ckpt/h5_file ckpt/crc32 comm/mpi_communicator config/config; do
  [[ -f "$repo/lib/autoloco/$src.cpp" ]] && objects+=("lib/CMakeFiles/autoloco_core.dir/autoloco/$src.cpp.o")
done
if ((${#objects[@]})); then
  log "3. compiling ${#objects[@]} of autoloco's translation units (${objects[*]##*/})"
  if ! cmake --build "$build" --target "${objects[@]}" >"$work/objects.log" 2>&1; then
    tail -n 30 "$work/objects.log" >&2
    failures+=("compiling autoloco's translation units (log: $work/objects.log)")
  else
    echo "  compiled: ${objects[*]##*/}"
  fi
fi

# --- 4. link and run against every library -----------------------------------------------------
probe=$work/probe
mkdir -p "$probe"
cp "$work/outside.h" "$probe/"
cat >"$probe/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.22)
project(autoloco_offline_probe C CXX)
set(CMAKE_CXX_STANDARD 17)
set(AUTOLOCO_CUDA OFF)
set(AUTOLOCO_BUILD_TESTS ON)
list(APPEND CMAKE_MODULE_PATH "$repo/third_party/cmake")
include(AutolocoDependencies) # the project's own find_package calls
add_executable(probe probe.cpp)
target_include_directories(probe SYSTEM PRIVATE \${HDF5_C_INCLUDE_DIRS})
target_link_libraries(probe PRIVATE MPI::MPI_C yaml-cpp fmt::fmt \${HDF5_C_LIBRARIES} ZLIB::ZLIB)
target_compile_definitions(probe PRIVATE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1) # as autoloco::core
add_executable(probe_catch probe_catch.cpp)
target_link_libraries(probe_catch PRIVATE Catch2::Catch2)
EOF
cat >"$probe/probe.cpp" <<'EOF'
#include <mpi.h>
#include <hdf5.h>
#include <zlib.h>
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>
#include <string>
#include "outside.h"
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  YAML::Node y = YAML::Load("ranks: [1, 2]\nname: probe");
  int vals[4] = {rank, 1, 2, 3}, back[4] = {0, 0, 0, 0};
  std::string file = fmt::format("probe-{}.h5", rank);
  hid_t f = H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t dims[1] = {4};
  hid_t s = H5Screate_simple(1, dims, nullptr);
  hid_t d = H5Dcreate2(f, "v", H5T_NATIVE_INT, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, vals);
  H5Dread(d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, back);
  H5Dclose(d); H5Sclose(s); H5Fclose(f);
  unsigned long crc = crc32(0L, reinterpret_cast<const Bytef *>(back), sizeof back);
  unsigned long want = crc32(0L, reinterpret_cast<const Bytef *>(vals), sizeof vals);
  int ok = (y["ranks"].size() == 2 && y["name"].as<std::string>() == "probe" && crc == want) ? 1 : 0;
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  unsigned maj, min, rel;
  H5get_libversion(&maj, &min, &rel);
  if (rank == 0) {
    fmt::print("  probe: {} of {} ranks ok (yaml-cpp, HDF5 {}.{}.{} write+read, zlib {} crc32, fmt, MPI)\n",
               all, size, maj, min, rel, zlibVersion());
    std::fflush(stdout);
    print_outside(getenv("AUTOLOCO_OFFLINE_PREFIX"));
  }
  MPI_Finalize();
  return all == size ? 0 : 1;
}
EOF
cat >"$probe/probe_catch.cpp" <<'EOF'
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
TEST_CASE("offline prefix Catch2") { REQUIRE(1 + 1 == 2); }
EOF
log "4. a probe built with the project's AutolocoDependencies.cmake, run on 2 ranks; a Catch2 test"
if cmake -S "$probe" -B "$probe/build" -G Ninja -DCMAKE_PREFIX_PATH="$AUTOLOCO_TORCH_PREFIX;$prefix/usr" \
  -DCMAKE_IGNORE_PREFIX_PATH=/usr >"$work/probe.log" 2>&1 &&
  cmake --build "$probe/build" >>"$work/probe.log" 2>&1; then
  (cd "$probe/build" && timeout 120 mpiexec "${run_args[@]}" ./probe) || failures+=("probe run")
  if out=$("$probe/build/probe_catch" 2>&1); then
    echo "  catch2: $(tail -n 1 <<<"$out")"
  else
    failures+=("Catch2 test: $out")
  fi
else
  tail -n 30 "$work/probe.log" >&2
  failures+=("probe build (log: $work/probe.log)")
fi

# --- optional: a whole target ------------------------------------------------------------------
if [[ -n "${AUTOLOCO_OFFLINE_CHECK_TARGET:-}" ]]; then
  t=$AUTOLOCO_OFFLINE_CHECK_TARGET
  log "building target $t in full"
  if cmake --build "$build" --target "$t" >"$work/target.log" 2>&1; then
    exe=$(find "$build" -name "$t" -type f -perm -u+x | head -n 1)
    if [[ -n "$exe" ]] && "$exe" --help >"$work/target-help.log" 2>&1; then
      echo "  $t --help: $(head -n 1 "$work/target-help.log")"
    else
      failures+=("$t --help (log: $work/target-help.log)")
    fi
  else
    tail -n 30 "$work/target.log" >&2
    failures+=("building $t (log: $work/target.log)")
  fi
fi

mode="system copies hidden: $hidden_dirs directories, $hidden_files files"
[[ "$AUTOLOCO_OFFLINE_CHECK_INNER" == visible ]] && mode="system copies VISIBLE (no private mount namespace)"
if ((${#failures[@]})); then
  printf '  failed: %s\n' "${failures[@]}" >&2
  die "FAILED with $prefix ($mode)"
fi
log "OK: $prefix is enough to configure autoloco and to build and run MPI/HDF5/yaml-cpp/fmt/zlib/Catch2 code ($mode)"
