#!/usr/bin/env bash
# Installs what building and testing epigemm needs on a Debian machine, and nothing that is
# already there. Runs as root (CI and the development machines) or through sudo.
set -euo pipefail

packages=(cmake ninja-build g++ make pkg-config libgtest-dev libopenblas-dev libdnnl-dev)
# --ci: also what CI's clang, sanitizer and fuzzing builds need (scripts/clang_build.sh,
# scripts/sanitize.sh): clang, its sanitizer and libFuzzer runtimes, its OpenMP runtime.
if [ "${1:-}" = "--ci" ]; then packages+=(clang libclang-rt-14-dev libomp-dev); fi
missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install_deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
