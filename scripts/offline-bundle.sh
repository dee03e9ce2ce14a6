#!/usr/bin/env bash
# offline-bundle.sh: download, on a connected Debian 12 (bookworm) amd64 machine, the .deb packages
# that autoloco's build and tests need beyond LibTorch and CUDA, into one folder that can be carried
# to a machine with no package registry and installed there, without root, by
# scripts/offline-install.sh.
#
# Usage:
#   scripts/offline-bundle.sh [--out DIR] [--update]
#     --out DIR   where the .deb files and MANIFEST go (default: <repo>/.offline-bundle)
#     --update    refresh the private package lists (see below) even when they exist
#   then, on the offline machine:  scripts/offline-install.sh DIR [PREFIX]
#
# What goes in (decided here; MANIFEST lists the result):
#   dev   the -dev packages, WITHOUT their apt dependencies (headers, .so links, CMake files):
#         libopenmpi-dev libhdf5-dev libyaml-cpp-dev libfmt-dev catch2 zlib1g-dev libzstd-dev
#         rapidjson-dev
#   core  the runtime packages that autoloco links or launches, always installed:
#         libopenmpi3 openmpi-bin openmpi-common libpmix2 libhwloc15 libhdf5-103-1
#         libyaml-cpp0.7 libfmt9 libzstd1
#   dep   the rest of the recursive Depends/Pre-Depends closure of the core packages (first
#         alternative of each group); offline-install.sh skips a dep package whose shared
#         libraries the target system already has (so that Debian 12's copies do not shadow newer
#         system ones through LD_LIBRARY_PATH).
# Left out of the closure:
#   - the base every glibc Linux with a C++ compiler has: libc6, libgcc-s1, libstdc++6,
#     gcc-12-base, zlib1g (the target needs glibc >= 2.36 and libstdc++ of GCC >= 12, as the
#     binaries are Debian 12's);
#   - every package of Priority required or important (dpkg, tar, debconf, passwd, adduser,
#     readline-common, libpam-modules, ...): Debian's maintainer-script machinery, which nothing
#     here loads;
#   - libhwloc-plugins (hwloc's optional PCI/OpenCL/X11/libxml2 plugins: 12 MB with libicu72 and
#     libxml2; hwloc discovers the CPU topology without them);
#   - openssh-client (Open MPI starts remote daemons with ssh; single-node runs never do, and a
#     cluster has its own ssh).
#
# Package lists: if the system's apt lists lack a package (no `apt-get update` was run), the script
# keeps private lists in $AUTOLOCO_APT_LISTS and runs `apt-get update` into them, which needs no
# root. `apt-get download` needs no root either.
#
# Idempotent: a .deb already in DIR whose sha256 matches the package index is reused; .deb files
# that are no longer wanted are removed. Fails if DIR ends up larger than the transfer limit.
#
# Environment:
#   AUTOLOCO_APT_LISTS     private apt lists directory (default:
#                          ${XDG_CACHE_HOME:-$HOME/.cache}/autoloco/apt-lists), used only when
#                          the system lists lack a package, or always when set explicitly
#   AUTOLOCO_BUNDLE_MAX_MB limit on the folder's size, in MiB (default 64)
#   AUTOLOCO_BUNDLE_ANY_DISTRO=1  allow a machine that is not Debian 12 amd64 (not tested)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out="$repo/.offline-bundle"
force_update=0
max_mb=${AUTOLOCO_BUNDLE_MAX_MB:-64}

log() { printf 'offline-bundle: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}
usage() { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; }

while (($#)); do
  case "$1" in
    --out)
      (($# >= 2)) || die "--out needs a directory"
      out=$2
      shift 2
      ;;
    --out=*)
      out=${1#--out=}
      shift
      ;;
    --update)
      force_update=1
      shift
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

readonly DEV_PACKAGES=(libopenmpi-dev libhdf5-dev libyaml-cpp-dev libfmt-dev catch2 zlib1g-dev
  libzstd-dev rapidjson-dev)
readonly CORE_PACKAGES=(libopenmpi3 openmpi-bin openmpi-common libpmix2 libhwloc15 libhdf5-103-1
  libyaml-cpp0.7 libfmt9 libzstd1)
readonly BASE_PACKAGES=(libc6 libgcc-s1 libstdc++6 gcc-12-base zlib1g)
readonly NOT_NEEDED=(libhwloc-plugins openssh-client)

# --- the machine -------------------------------------------------------------------------------
for tool in apt-get apt-cache dpkg sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found: run this on a Debian 12 (bookworm) amd64 machine"
done
arch=$(dpkg --print-architecture)
codename=$(awk -F= '$1 == "VERSION_CODENAME" {gsub(/"/, "", $2); print $2}' /etc/os-release 2>/dev/null || true)
if [[ "$arch" != amd64 || "$codename" != bookworm ]]; then
  [[ "${AUTOLOCO_BUNDLE_ANY_DISTRO:-0}" == 1 ]] ||
    die "this is $codename/$arch, not bookworm/amd64: the bundle must be Debian 12 amd64 packages (set AUTOLOCO_BUNDLE_ANY_DISTRO=1 to try anyway)"
  log "warning: $codename/$arch, not bookworm/amd64 (AUTOLOCO_BUNDLE_ANY_DISTRO=1)"
fi

# --- package lists -----------------------------------------------------------------------------
# A private binary cache: some images (Docker's debian) disable apt's, which makes every apt-cache
# call re-read the lists (seconds each).
apt_cache_dir=$(mktemp -d "${TMPDIR:-/tmp}/autoloco-apt-cache.XXXXXX")
trap 'rm -rf "$apt_cache_dir"' EXIT
apt_opts=(-o "Dir::Cache=$apt_cache_dir" -o "Dir::Cache::pkgcache=$apt_cache_dir/pkgcache.bin"
  -o "Dir::Cache::srcpkgcache=$apt_cache_dir/srcpkgcache.bin")
# As root, apt-get download would try to drop to the _apt user, who cannot write to DIR.
[[ $(id -u) -eq 0 ]] && apt_opts+=(-o APT::Sandbox::User=root)

have_candidates() {
  local v
  v=$(apt-cache "${apt_opts[@]}" policy "${DEV_PACKAGES[@]}" "${CORE_PACKAGES[@]}" 2>/dev/null |
    awk '/Candidate:/ {n++; if ($2 == "(none)") bad = 1} END {print (bad ? 0 : n)}')
  ((v == ${#DEV_PACKAGES[@]} + ${#CORE_PACKAGES[@]}))
}
use_private_lists() {
  local lists=${AUTOLOCO_APT_LISTS:-${XDG_CACHE_HOME:-$HOME/.cache}/autoloco/apt-lists}
  mkdir -p "$lists/partial" || die "cannot create $lists"
  apt_opts+=(-o "Dir::State::Lists=$lists")
  if ((force_update)) || ! have_candidates; then
    log "apt-get update into private lists $lists (no root needed)"
    apt-get "${apt_opts[@]}" -qq update >&2 ||
      die "apt-get update into $lists failed (network? /etc/apt/sources.list?)"
  fi
}
if [[ -n "${AUTOLOCO_APT_LISTS:-}" ]] || ((force_update)); then
  use_private_lists
elif ! have_candidates; then
  log "the system's apt lists lack some packages (was 'apt-get update' ever run?)"
  use_private_lists
fi
have_candidates ||
  die "apt knows no candidate for some of ${DEV_PACKAGES[*]} ${CORE_PACKAGES[*]}: check /etc/apt/sources.list (Debian 12 main)"

# --- the closure -------------------------------------------------------------------------------
declare -A priority=() version=() sha256=() pkg_arch=()
load_records() { # the candidate records of the packages named, into the arrays above
  local p pr v a s
  while read -r p pr v a s; do
    priority[$p]=$pr version[$p]=$v pkg_arch[$p]=$a sha256[$p]=$s
  done < <(apt-cache "${apt_opts[@]}" show --no-all-versions "$@" 2>/dev/null | awk '
    function flush() { if (p != "") print p, (pr == "" ? "optional" : pr), v, a, s; p = pr = v = a = s = "" }
    /^Package:/ { flush(); p = $2 } /^Priority:/ { pr = $2 } /^Version:/ { v = $2 }
    /^Architecture:/ { a = $2 } /^SHA256:/ { s = $2 } END { flush() }')
  for p in "$@"; do
    [[ -n "${version[$p]:-}" ]] || die "apt knows no package '$p'"
  done
}
# One line per dependency group (Depends, Pre-Depends) of the packages named: "OWNER ALT..." with a
# virtual package written <name>=provider1,provider2.
dep_groups() {
  apt-cache "${apt_opts[@]}" depends --important "$@" 2>/dev/null | awk '
    function flush() { if (cur != "") print owner, cur; cur = "" }
    /^[^ ]/ { flush(); owner = $1; next }
    /^ [ |](Depends|PreDepends):/ {
      if (!cont) flush()
      cur = (cur == "" ? $2 : cur " " $2)
      cont = ($0 ~ /^ \|/); virt = ($2 ~ /^</); nprov = 0
      next
    }
    /^    / && virt { sub(/^ +/, ""); cur = cur (nprov++ ? "," : "=") $0; next }
    END { flush() }'
}

declare -A role=() excluded=() is_core=()
for p in "${BASE_PACKAGES[@]}"; do excluded[$p]="base system"; done
for p in "${NOT_NEEDED[@]}"; do excluded[$p]="not needed"; done
order=()
for p in "${DEV_PACKAGES[@]}"; do
  role[$p]=dev
  order+=("$p")
done
for p in "${CORE_PACKAGES[@]}"; do is_core[$p]=1; done

log "resolving the runtime closure of ${CORE_PACKAGES[*]}"
frontier=("${CORE_PACKAGES[@]}")
while ((${#frontier[@]})); do
  fresh=()
  declare -A in_fresh=()
  for p in "${frontier[@]}"; do
    [[ -n "${role[$p]:-}" || -n "${excluded[$p]:-}" || -n "${in_fresh[$p]:-}" ]] && continue
    in_fresh[$p]=1
    fresh+=("$p")
  done
  unset in_fresh
  ((${#fresh[@]})) || break
  load_records "${fresh[@]}"
  taken=()
  for p in "${fresh[@]}"; do
    if [[ -n "${is_core[$p]:-}" ]]; then
      role[$p]=core
    elif [[ "${priority[$p]}" == required || "${priority[$p]}" == important ]]; then
      excluded[$p]="Priority: ${priority[$p]}"
      continue
    else
      role[$p]=dep
    fi
    order+=("$p")
    taken+=("$p")
  done
  frontier=()
  ((${#taken[@]})) || break
  while read -r owner group; do
    read -r -a alts <<<"$group"
    satisfied=0
    for a in "${alts[@]}"; do # one alternative already taken or left out: nothing to add
      provs=""
      [[ "$a" == *=* ]] && provs=${a#*=}
      for c in "${a%%=*}" ${provs//,/ }; do
        [[ "$c" == \<* ]] && continue
        [[ -n "${excluded[$c]:-}" || -n "${role[$c]:-}" ]] && satisfied=1
      done
    done
    ((satisfied)) && continue
    pick=""
    for a in "${alts[@]}"; do # else the first real package, or the first provider of a virtual one
      if [[ "$a" != \<* ]]; then
        pick=$a
      elif [[ "$a" == *=* ]]; then
        pick=${a#*=}
        pick=${pick%%,*}
      fi
      [[ -n "$pick" ]] && break
    done
    [[ -n "$pick" ]] || die "cannot satisfy '$group' (a dependency of $owner): no package provides it"
    frontier+=("$pick")
  done < <(dep_groups "${taken[@]}")
done
load_records "${DEV_PACKAGES[@]}"

# --- download ----------------------------------------------------------------------------------
mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)
declare -A wanted=()
manifest_lines=()
fetch=()
reused=0
deb_name() { printf '%s_%s_%s.deb' "$1" "${version[$1]//:/%3a}" "${pkg_arch[$1]}"; } # as apt-get download names it
for p in "${order[@]}"; do
  f=$(deb_name "$p")
  wanted[$f]=1
  if [[ -f "$out/$f" && "$(sha256sum "$out/$f" | cut -d' ' -f1)" == "${sha256[$p]}" ]]; then
    reused=$((reused + 1))
  else
    rm -f "$out/$f"
    fetch+=("$p=${version[$p]}")
  fi
  manifest_lines+=("$(printf '%-26s %-32s %-4s %s %s' "$p" "${version[$p]}" "${role[$p]}" "${sha256[$p]}" "$f")")
done
if ((${#fetch[@]})); then
  log "downloading ${#fetch[@]} packages into $out"
  (cd "$out" && apt-get "${apt_opts[@]}" -qq download "${fetch[@]}" >&2) ||
    die "apt-get download failed (network? run with --update to refresh the package lists)"
fi
for p in "${order[@]}"; do
  f=$(deb_name "$p")
  [[ -f "$out/$f" ]] || die "apt-get download did not write $out/$f"
  [[ "$(sha256sum "$out/$f" | cut -d' ' -f1)" == "${sha256[$p]}" ]] ||
    die "$out/$f does not match the sha256 of the package index: remove it and rerun"
done
shopt -s nullglob
for f in "$out"/*.deb; do
  if [[ -z "${wanted[${f##*/}]:-}" ]]; then
    log "removing ${f##*/} (no longer wanted)"
    rm -f "$f"
  fi
done
shopt -u nullglob

{
  echo "# autoloco offline bundle: Debian 12 (bookworm) amd64 packages for scripts/offline-install.sh"
  echo "# written by scripts/offline-bundle.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# role: dev = -dev package without its dependencies; core = always installed;"
  echo "#       dep = dependency closure, skipped at install when the system has its libraries"
  echo "# left out:"
  for p in $(printf '%s\n' "${!excluded[@]}" | sort); do echo "#   $p (${excluded[$p]})"; done
  echo "# package                  version                          role sha256 file"
  printf '%s\n' "${manifest_lines[@]}"
} >"$out/MANIFEST"

bytes=$(cat "$out"/*.deb "$out/MANIFEST" | wc -c)
mib=$(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1048576}')
log "${#order[@]} packages (${#fetch[@]} downloaded, $reused reused), $mib MiB in $out"
if ((bytes > max_mb * 1048576)); then
  die "$out holds $mib MiB, more than the ${max_mb} MiB limit (AUTOLOCO_BUNDLE_MAX_MB): check MANIFEST for an unexpected package"
fi
echo "$out"
