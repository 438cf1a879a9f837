#!/usr/bin/env bash
# Installs what building and testing epigemm needs on a Debian machine, and nothing that is
# already there. Runs as root (CI and the development machines) or through sudo. apt's own
# output is shown: on a bare machine this step takes a minute or two. Last, CUTLASS's headers for
# the cutlass backend: the pinned PyPI wheel, checked and extracted into .deps/
# (scripts/fetch_cutlass.sh; without network it uses a wheel already in .deps/).
set -euo pipefail

# package -> why epigemm needs it
declare -A purpose=(
  [cmake]="configures the build"
  [ninja-build]="runs the build"
  [g++]="compiles the library"
  [make]="runs the README's commands"
  [pkg-config]="finds OpenBLAS; tests the installed epigemm.pc"
  [libgtest-dev]="GoogleTest, for the tests"
  [libopenblas-dev]="OpenBLAS, a GEMM engine of the cpu backend"
  [libdnnl-dev]="oneDNN, a GEMM engine of the cpu backend"
  [python3-venv]="the Python package's tests run in a venv (make python-test)"
  [python3-dev]="Python's headers, for the Python extension"
  [python3-pip]="downloads the pinned CUTLASS wheel (scripts/fetch_cutlass.sh)"
)
packages=(cmake ninja-build g++ make pkg-config libgtest-dev libopenblas-dev libdnnl-dev
          python3-venv python3-dev python3-pip)
# --ci: also what CI's clang, sanitizer and fuzzing builds need (scripts/clang_build.sh,
# scripts/sanitize.sh): clang, its sanitizer and libFuzzer runtimes, its OpenMP runtime.
if [ "${1:-}" = "--ci" ]; then packages+=(clang libclang-rt-14-dev libomp-dev); fi
missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

# A wheel that fails its checksum stops here; one that cannot be downloaded only leaves the
# cutlass backend out of the build.
fetch_cutlass() {
  local rc=0
  bash "$(dirname "$0")/fetch_cutlass.sh" || rc=$?
  if [ $rc -eq 2 ]; then
    echo "install_deps: no CUTLASS headers; the build leaves the cutlass backend out" >&2
  elif [ $rc -ne 0 ]; then
    exit $rc
  fi
}

if [ ${#missing[@]} -eq 0 ]; then
  fetch_cutlass
  exit 0
fi

echo "install_deps: installing ${#missing[@]} missing package(s):"
for package in "${missing[@]}"; do
  echo "  $package: ${purpose[$package]}"
done
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
# Waits up to 10 minutes for another apt/dpkg run to release its lock instead of failing at once.
apt_get=("${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=600)
echo "install_deps: apt-get update"
"${apt_get[@]}" update
# No recommended packages: libdnnl-dev would bring OpenCL and more that the build does not use.
echo "install_deps: apt-get install ${missing[*]}"
"${apt_get[@]}" install -y --no-install-recommends "${missing[@]}"
fetch_cutlass
echo "install_deps: done"
