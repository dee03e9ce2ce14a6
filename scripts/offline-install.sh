#!/usr/bin/env bash
# offline-install.sh: install, without root and without a network, the bundle that
# scripts/offline-bundle.sh made (Open MPI, HDF5, yaml-cpp, fmt, Catch2, zlib headers, from Debian
# 12) into one prefix, make it relocated there, and check it with a two-rank MPI program.
#
# Usage:
#   scripts/offline-install.sh BUNDLE_DIR [PREFIX]      PREFIX default: <repo>/.offline-prefix
#   source PREFIX/env.sh
#   cmake -S . -B build/x -G Ninja -DCMAKE_PREFIX_PATH="$(scripts/torch-cuda.sh | tail -1)"
# (env.sh prepends PREFIX/usr to CMAKE_PREFIX_PATH, so CMake finds MPI, HDF5, yaml-cpp, fmt,
# Catch2 and ZLIB there.)
#
# What it does:
#   - checks each .deb against the sha256 in BUNDLE_DIR/MANIFEST;
#   - unpacks every package into PREFIX (dpkg-deb when present, else ar + tar, else python3 + tar;
#     data.tar.xz/.zst/.gz/.bz2/plain), with /lib, /bin and /sbin merged into PREFIX/usr, and
#     without usr/share/doc and usr/share/man; a "dep" package (see offline-bundle.sh) is skipped
#     when the system already has every shared library it ships (same soname), so that Debian
#     12's copies do not shadow the system's; AUTOLOCO_OFFLINE_PREFER_SYSTEM=0 installs them all;
#   - points absolute symlinks at /usr, /etc, /lib, ... into PREFIX; points the zlib1g-dev link
#     libz.so (and any other -dev link into a package left to the system) at the system's library,
#     and removes the links left dangling (C++/Fortran/high-level HDF5 libraries not bundled);
#   - creates what Debian's alternatives would: mpicc, mpicxx, mpic++, mpiCC, mpiexec, mpirun,
#     include/x86_64-linux-gnu/mpi, the mpi*.pc and hdf5.pc pkg-config links; rewrites /usr in
#     the pkg-config files and in PMIx's mca-params file;
#   - writes PREFIX/env.sh (see the comment in it), with the relocation variables that Open MPI
#     (OPAL_PREFIX, OPAL_SYSCONFDIR), PMIx (PMIX_LIBDIR, PMIX_SYSCONFDIR, PMIX_DATADIR) and hwloc
#     (HWLOC_PLUGINS_PATH) need, and HDF5_ROOT for CMake's FindHDF5;
#   - checks: every library and plugin of the prefix resolves its dependencies (ldd), mpicc
#     reports PREFIX paths, and a tiny MPI C program built with the prefix's mpicc runs on 2 ranks
#     under the prefix's mpiexec. Prints one line "offline-install: OK ..." or fails.
# It writes nothing outside PREFIX (and a scratch folder under $TMPDIR, removed at the end).
# Running it again reinstalls PREFIX from scratch (PREFIX must be empty or made by this script).
#
# Environment:
#   AUTOLOCO_OFFLINE_PREFER_SYSTEM  1 (default): skip dep packages the system provides; 0: install all
#   AUTOLOCO_OFFLINE_DEB_TOOL       dpkg-deb, ar or python3: how to read .deb files (default: the
#                                   first of them found)
#   OMPI_CC                         the C compiler behind the prefix's mpicc (default gcc)
#   TMPDIR                          scratch space for the MPI check
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
readonly MULTIARCH=x86_64-linux-gnu
readonly MARKER=.autoloco-offline-prefix

log() { printf 'offline-install: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}
usage() { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; }

[[ "${1:-}" == -h || "${1:-}" == --help ]] && {
  usage
  exit 0
}
(($# >= 1 && $# <= 2)) || die "usage: scripts/offline-install.sh BUNDLE_DIR [PREFIX] (see --help)"
bundle=$1
prefix=${2:-$repo/.offline-prefix}
prefer_system=${AUTOLOCO_OFFLINE_PREFER_SYSTEM:-1}

[[ -f "$bundle/MANIFEST" ]] || die "$bundle/MANIFEST not found: BUNDLE_DIR is the folder scripts/offline-bundle.sh wrote"
bundle=$(cd "$bundle" && pwd)
[[ "$(uname -m)" == x86_64 ]] || die "the bundle holds x86-64 (amd64) packages; this machine is $(uname -m)"
tar --version 2>/dev/null | grep -q 'GNU tar' || die "GNU tar is needed (for --transform)"
for tool in sha256sum realpath find sed awk; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found"
done

# --- the bundle --------------------------------------------------------------------------------
while read -r _ _ _ sha file; do
  deb=$bundle/$file
  [[ -f "$deb" ]] || die "$deb (listed in MANIFEST) is missing: rerun scripts/offline-bundle.sh and copy the whole folder"
  [[ "$(sha256sum "$deb" | cut -d' ' -f1)" == "$sha" ]] || die "$deb is damaged (sha256 differs from MANIFEST)"
done < <(grep -v '^#' "$bundle/MANIFEST" | awk 'NF >= 5')

# --- the prefix --------------------------------------------------------------------------------
mkdir -p "$prefix" || die "cannot create $prefix"
prefix=$(cd "$prefix" && pwd -P)
[[ "$prefix" =~ ^[A-Za-z0-9._/+-]+$ ]] || die "PREFIX '$prefix' has characters other than letters, digits and ._/+-"
if [[ -n "$(ls -A "$prefix")" ]]; then
  [[ -f "$prefix/$MARKER" ]] ||
    die "$prefix is not empty and was not made by offline-install.sh: give an empty or new PREFIX"
  log "reinstalling $prefix"
  find "$prefix" -mindepth 1 -maxdepth 1 -exec rm -rf {} +
fi
touch "$prefix/$MARKER"
state=$prefix/.autoloco-offline
mkdir -p "$state"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/autoloco-offline.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# --- reading .deb files ------------------------------------------------------------------------
deb_tool=${AUTOLOCO_OFFLINE_DEB_TOOL:-}
if [[ -n "$deb_tool" ]]; then
  [[ "$deb_tool" =~ ^(dpkg-deb|ar|python3)$ ]] || die "AUTOLOCO_OFFLINE_DEB_TOOL must be dpkg-deb, ar or python3"
elif command -v dpkg-deb >/dev/null 2>&1; then
  deb_tool=dpkg-deb
elif command -v ar >/dev/null 2>&1; then
  deb_tool="ar"
elif command -v python3 >/dev/null 2>&1; then
  deb_tool=python3
else
  die "need dpkg-deb, ar (binutils) or python3 to read .deb files"
fi
decompress() { # decompress MEMBER_NAME: stdin to stdout
  case "$1" in
    *.xz) xz -dc ;;
    *.zst) zstd -dc ;;
    *.gz) gzip -dc ;;
    *.bz2) bzip2 -dc ;;
    *.tar) cat ;;
    *) die "unknown .deb data member $1" ;;
  esac
}
py_ar() { # py_ar DEB [MEMBER]: list the members, or write MEMBER to stdout
  python3 - "$@" <<'EOF'
import sys
path, want = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None)
with open(path, "rb") as f:
    if f.read(8) != b"!<arch>\n":
        sys.exit(f"{path}: not an ar archive")
    while True:
        head = f.read(60)
        if len(head) < 60:
            break
        name, size = head[:16].decode().strip().rstrip("/"), int(head[48:58])
        data = f.read(size)
        if size % 2:
            f.read(1)
        if want is None:
            print(name)
        elif name == want:
            sys.stdout.buffer.write(data)
EOF
}
data_tar() { # data_tar DEB: the uncompressed data tar on stdout
  local member
  case "$deb_tool" in
    dpkg-deb) dpkg-deb --fsys-tarfile "$1" ;;
    ar)
      member=$(ar t "$1" | grep '^data\.tar') || die "$1: no data.tar member"
      ar p "$1" "$member" | decompress "$member"
      ;;
    python3)
      member=$(py_ar "$1" | grep '^data\.tar') || die "$1: no data.tar member"
      py_ar "$1" "$member" | decompress "$member"
      ;;
  esac
}

# --- the system's libraries --------------------------------------------------------------------
ldconfig_bin=$(command -v ldconfig || true)
for c in /sbin/ldconfig /usr/sbin/ldconfig; do [[ -z "$ldconfig_bin" && -x "$c" ]] && ldconfig_bin=$c; done
system_libs=$scratch/system-libs # "soname path" of the system's x86-64 libraries
{
  if [[ -n "$ldconfig_bin" ]]; then
    "$ldconfig_bin" -p 2>/dev/null | awk '/x86-64/ && $NF ~ /^\// {print $1, $NF}'
  fi
  for d in /lib/$MULTIARCH /usr/lib/$MULTIARCH /lib64 /usr/lib64; do
    [[ -d "$d" ]] && find "$d" -maxdepth 1 -name 'lib*.so.*' -printf '%f %p\n' 2>/dev/null
  done
} | while read -r soname path; do [[ -e "$path" ]] && echo "$soname $path"; done >"$system_libs" || true
system_lib() { awk -v s="$1" '$1 == s {print $2; exit}' "$system_libs"; } # path of SONAME, or nothing

# --- unpack ------------------------------------------------------------------------------------
log "unpacking $bundle into $prefix (reading .deb files with $deb_tool)"
: >"$state/packages"
skipped_sonames=()
installed=0
skipped=0
while read -r pkg version role sha file; do
  deb=$bundle/$file
  data_tar "$deb" >"$scratch/data.tar" || die "cannot read $deb"
  if [[ "$role" == dep && "$prefer_system" == 1 ]]; then
    # the package's sonames: libX.so.N links or files, or libX-N.so files (libdb-5.3.so),
    # directly in a lib directory
    mapfile -t sonames < <(tar -tvf "$scratch/data.tar" | awk -v d="$MULTIARCH" '{
      t = substr($1, 1, 1); n = $6
      if (!sub("^\\./(usr/)?lib/" d "/", "", n)) next
      if (n ~ /^lib[^\/]*\.so\.[0-9]+$/ || (t == "-" && n ~ /^lib[^\/]*\.so$/)) print n
    }' | sort -u)
    have_all=$((${#sonames[@]} > 0))
    for s in "${sonames[@]}"; do [[ -n "$(system_lib "$s")" ]] || have_all=0; done
    if ((have_all)); then
      echo "$pkg $version skipped (system has ${sonames[*]})" >>"$state/packages"
      skipped_sonames+=("${sonames[@]}")
      skipped=$((skipped + 1))
      continue
    fi
  fi
  tar -xf "$scratch/data.tar" -C "$prefix" --no-same-owner --wildcards \
    --exclude='./usr/share/doc/*' --exclude='./usr/share/man/*' --exclude='./usr/share/lintian/*' \
    --transform='s,^\./lib/,./usr/lib/,S' --transform='s,^\./lib$,./usr/lib,S' \
    --transform='s,^\./bin/,./usr/bin/,S' --transform='s,^\./sbin/,./usr/sbin/,S' ||
    die "cannot unpack $deb into $prefix"
  echo "$pkg $version installed ($role)" >>"$state/packages"
  installed=$((installed + 1))
done < <(grep -v '^#' "$bundle/MANIFEST" | awk 'NF >= 5')
rm -f "$scratch/data.tar"
((installed > 0)) || die "MANIFEST in $bundle lists no packages"
log "$installed packages unpacked, $skipped left to the system (list: $state/packages)"

usr=$prefix/usr
lib=$usr/lib/$MULTIARCH
[[ -x "$usr/bin/opal_wrapper" && -f "$lib/libmpi.so.40" && -f "$usr/include/hdf5/serial/hdf5.h" ]] ||
  die "the bundle lacks Open MPI or HDF5 files: was it made by scripts/offline-bundle.sh?"

# --- symlinks ----------------------------------------------------------------------------------
relink() { # relink LINK TARGET: make LINK a relative link to TARGET (both absolute paths)
  ln -sfn "$(realpath -m -s --relative-to="$(dirname "$1")" "$2")" "$1"
}
moved=0
while IFS= read -r -d '' link; do
  t=$(readlink "$link")
  case "$t" in
    /usr/* | /etc/* | /opt/* | /var/*) relink "$link" "$prefix$t" ;;
    /lib/* | /bin/* | /sbin/*) relink "$link" "$usr$t" ;;
    *) continue ;;
  esac
  moved=$((moved + 1))
done < <(find "$prefix" -type l -lname '/*' -print0)

# Debian's alternatives (update-alternatives in the maintainer scripts, which dpkg -x skips)
for w in mpicc mpicxx mpic++ mpiCC mpiexec mpirun; do
  [[ -e "$usr/bin/$w.openmpi" ]] && ln -sfn "$w.openmpi" "$usr/bin/$w"
done
mkdir -p "$usr/include/$MULTIARCH" "$lib/pkgconfig"
ln -sfn "../../lib/$MULTIARCH/openmpi/include" "$usr/include/$MULTIARCH/mpi"
for pc in mpi:ompi mpi-c:ompi-c mpi-cxx:ompi-cxx hdf5:hdf5-serial; do
  [[ -e "$lib/pkgconfig/${pc#*:}.pc" ]] && ln -sfn "${pc#*:}.pc" "$lib/pkgconfig/${pc%%:*}.pc"
done

# -dev links into libraries left to the system (libz.so -> libz.so.1.2.13 of zlib1g, which is
# part of the base system): point them at the system's copy; remove other dangling links.
repair_ok=(libz.so.1 "${skipped_sonames[@]}")
repaired=0
removed=()
while IFS= read -r -d '' link; do
  [[ -e "$link" ]] && continue
  t=$(basename "$(readlink "$link")")
  soname=$(sed -n 's/^\(lib.*\.so\.[0-9][0-9]*\).*/\1/p' <<<"$t")
  sys=""
  if [[ -n "$soname" ]] && printf '%s\n' "${repair_ok[@]}" | grep -qxF "$soname"; then
    sys=$(system_lib "$soname")
  fi
  if [[ -n "$sys" ]]; then
    ln -sfn "$sys" "$link"
    repaired=$((repaired + 1))
  else
    removed+=("${link#"$prefix"/}")
    rm -f "$link"
  fi
done < <(find "$prefix" -type l -print0)
printf '%s\n' "${removed[@]}" >"$state/removed-links"
log "symlinks: $moved moved into the prefix, $repaired pointed at system libraries, ${#removed[@]} dangling removed (list: $state/removed-links)"

# --- relocation of text files ------------------------------------------------------------------
while IFS= read -r -d '' pc; do
  sed -i -e "s#^prefix=/usr\$#prefix=$usr#" -e "s#\([=IL ]\)/usr/#\1$usr/#g" "$pc"
done < <(find "$usr" -name '*.pc' -type f -print0)
pmix_conf=$lib/pmix2/share/pmix-mca-params.conf
[[ -f "$pmix_conf" ]] && sed -i "s#= */usr/#= $usr/#" "$pmix_conf"

# --- env.sh ------------------------------------------------------------------------------------
sed "s#@PREFIX@#$prefix#g" >"$prefix/env.sh" <<'EOF'
# Source this (". @PREFIX@/env.sh") to build and run autoloco against the offline prefix
# @PREFIX@ that scripts/offline-install.sh made from Debian 12 packages
# (Open MPI 4.1, HDF5 1.10, yaml-cpp 0.7, fmt 9, Catch2 2).
# LD_LIBRARY_PATH puts the prefix's libraries before the system's: a program that needs a newer
# copy of one of them would break, so source this for building and running autoloco (cmake, ninja,
# ctest, mpiexec, the binaries), not in shells used for unrelated tools.
# POSIX sh; sourcing it twice adds nothing twice.
AUTOLOCO_OFFLINE_PREFIX=@PREFIX@
export AUTOLOCO_OFFLINE_PREFIX
case ":${PATH:-}:" in *":$AUTOLOCO_OFFLINE_PREFIX/usr/bin:"*) ;;
  *) export PATH="$AUTOLOCO_OFFLINE_PREFIX/usr/bin${PATH:+:$PATH}" ;; esac
case ":${LD_LIBRARY_PATH:-}:" in *":$AUTOLOCO_OFFLINE_PREFIX/usr/lib/x86_64-linux-gnu:"*) ;;
  *) export LD_LIBRARY_PATH="$AUTOLOCO_OFFLINE_PREFIX/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;; esac
case ":${CMAKE_PREFIX_PATH:-}:" in *":$AUTOLOCO_OFFLINE_PREFIX/usr:"*) ;;
  *) export CMAKE_PREFIX_PATH="$AUTOLOCO_OFFLINE_PREFIX/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}" ;; esac
case ":${PKG_CONFIG_PATH:-}:" in *":$AUTOLOCO_OFFLINE_PREFIX/usr/lib/x86_64-linux-gnu/pkgconfig:"*) ;;
  *) export PKG_CONFIG_PATH="$AUTOLOCO_OFFLINE_PREFIX/usr/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" ;; esac
# Open MPI: its install prefix (bin, lib, wrapper data, help files, MCA components), and its
# sysconfdir, which Debian set to /etc/openmpi rather than under the prefix (it holds Debian's
# openmpi-mca-params.conf: pml ^ucx, btl ^uct,openib,ofi, mtl ^ofi, osc ^ucx,pt2pt).
export OPAL_PREFIX="$AUTOLOCO_OFFLINE_PREFIX/usr"
export OPAL_SYSCONFDIR="$AUTOLOCO_OFFLINE_PREFIX/etc/openmpi"
# PMIx (Debian's external libpmix2, which OPAL_PREFIX does not move; Debian configured its
# directories as absolute paths, so PMIX_PREFIX alone moves nothing): its plugins
# (PMIX_LIBDIR/pmix; else the system's, of another PMIx, or none), its pmix-mca-params.conf
# (PMIX_SYSCONFDIR) and its help texts (PMIX_DATADIR/pmix).
export PMIX_LIBDIR="$AUTOLOCO_OFFLINE_PREFIX/usr/lib/x86_64-linux-gnu/pmix2/lib"
export PMIX_SYSCONFDIR="$AUTOLOCO_OFFLINE_PREFIX/usr/lib/x86_64-linux-gnu/pmix2/share"
export PMIX_DATADIR="$AUTOLOCO_OFFLINE_PREFIX/usr/lib/x86_64-linux-gnu/pmix2/share"
# hwloc: its plugins are not bundled; keep a system's, built for another hwloc, out.
export HWLOC_PLUGINS_PATH="$AUTOLOCO_OFFLINE_PREFIX/usr/lib/x86_64-linux-gnu/hwloc"
# CMake's FindHDF5: Debian's serial HDF5 root (include/ and lib/ links), searched alone.
export HDF5_ROOT="$AUTOLOCO_OFFLINE_PREFIX/usr/lib/x86_64-linux-gnu/hdf5/serial"
EOF

# --- checks ------------------------------------------------------------------------------------
# shellcheck source=/dev/null
. "$prefix/env.sh"

# 1. every library, plugin and program that autoloco's build and runs load
ldd_fail=()
while IFS= read -r -d '' f; do
  head -c 4 "$f" 2>/dev/null | grep -q 'ELF' || continue
  missing=$(ldd "$f" 2>&1 | grep -E 'not found' || true)
  [[ -n "$missing" ]] && ldd_fail+=("${f#"$prefix"/}: $(tr -s ' \t\n' ' ' <<<"$missing")")
done < <(find "$lib" -maxdepth 1 -name 'lib*.so.*' -type f ! -name '*gfortran*' ! -name 'libmpi_java*' \
  ! -name 'libmpi_mpifh*' ! -name 'libmpi_use*' -print0
find "$lib/openmpi/lib/openmpi3" "$lib/pmix2/lib/pmix" -name '*.so' -type f -print0 2>/dev/null
find "$usr/bin" -type f -print0)
if ((${#ldd_fail[@]})); then
  printf '  %s\n' "${ldd_fail[@]}" >&2
  die "${#ldd_fail[@]} files of the prefix miss libraries (above); if a system library is too old, rerun with AUTOLOCO_OFFLINE_PREFER_SYSTEM=0"
fi

# 2. the wrapper compiler and ompi_info report the prefix
show=$(mpicc -showme 2>&1) || die "mpicc -showme failed: $show"
[[ "$show" == *"-I$lib/openmpi/include"* ]] || die "mpicc does not report the prefix's paths: $show"
ompi_prefix=$(ompi_info --path prefix 2>&1 | awk '{print $NF}')
[[ "$ompi_prefix" == "$usr" ]] || die "ompi_info reports prefix '$ompi_prefix', not $usr (OPAL_PREFIX not honoured?)"

# 3. a two-rank MPI program
cat >"$scratch/hello.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  int rank, size, sum = 0, one = 1, n = 1 << 20, ok = 1; /* 4 MiB: shared-memory rendezvous */
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  int *in = malloc(n * sizeof(int)), *out = malloc(n * sizeof(int));
  for (int i = 0; i < n; i++) in[i] = i % 1000;
  MPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  for (int i = 0; i < n; i++) ok &= (out[i] == size * (i % 1000));
  if (rank == 0) printf("ranks=%d sum=%d big=%s\n", size, sum, ok ? "ok" : "WRONG");
  MPI_Finalize();
  return sum == size && ok ? 0 : 1;
}
EOF
mpicc "$scratch/hello.c" -o "$scratch/hello" >"$scratch/cc.log" 2>&1 || {
  cat "$scratch/cc.log" >&2
  die "mpicc could not build a tiny MPI program (C compiler: ${OMPI_CC:-gcc}; set OMPI_CC to use another)"
}
run_args=(-n 2 --oversubscribe)
[[ $(id -u) -eq 0 ]] && run_args+=(--allow-run-as-root)
if out=$(cd "$scratch" && timeout 120 mpiexec "${run_args[@]}" ./hello 2>&1) && [[ "$out" == *"ranks=2 sum=2 big=ok"* ]]; then
  log "OK: $installed packages in $prefix; mpicc + mpiexec -n 2 ran ($(mpiexec --version 2>&1 | head -1)); source $prefix/env.sh"
else
  printf '%s\n' "$out" >&2
  [[ "$out" == *"process_vm_readv"* || "$out" == *"Read -1, expected"* ]] &&
    log "hint: a container without ptrace rights: export OMPI_MCA_btl_vader_single_copy_mechanism=none"
  die "FAILED: mpiexec -n 2 of a tiny MPI program (output above)"
fi
