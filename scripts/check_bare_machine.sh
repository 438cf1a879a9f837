#!/usr/bin/env bash
# The README's two commands on a fresh Debian machine: a minimal Debian root made by debootstrap
# (no compiler, no Python, no libraries), given only what the README asks of a fresh machine (git
# and make, without their recommended packages), a clone of this repository's committed HEAD,
# then `make run` and `make test` in it as root, as on a new machine. Packages already on this machine prove nothing there: the commands
# must install everything they need themselves. Without the CUDA toolkit in that root, this checks
# the CPU path; .ci/run checks the CUDA build on the machine itself.
#
#   sudo scripts/check_bare_machine.sh [--keep]     # --keep: leave the root in place afterwards
#
# Needs root (debootstrap, chroot, mount) and Debian's archive and PyPI over the network; takes a
# few minutes (the Debian root, the packages, a CPU build and the tests). Exit status: 0 when both
# commands succeed, 1 when one fails, 77 when no root can be made here (says why).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
suite=${EPIGEMM_BARE_SUITE:-bookworm}
mirror=${EPIGEMM_BARE_MIRROR:-http://deb.debian.org/debian}
keep=0
[ "${1:-}" = "--keep" ] && keep=1

cannot() {
  echo "check_bare_machine: SKIP: $*"
  exit 77
}
[ "$(id -u)" = 0 ] || cannot "needs root (debootstrap, chroot and mount); run it with sudo"
if ! command -v debootstrap > /dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap > /dev/null 2>&1 ||
    cannot "debootstrap is not installed and apt-get could not install it"
fi

work=$(mktemp -d /var/tmp/epigemm-bare.XXXXXX)
root="$work/root"
cleanup() {
  if mountpoint -q "$root/proc" 2> /dev/null; then umount "$root/proc" || umount -l "$root/proc" || true; fi
  if [ "$keep" = 1 ]; then
    echo "check_bare_machine: the root is left in $root"
  elif findmnt -rn -o TARGET | grep -q "^$root"; then
    echo "check_bare_machine: $work is left in place: something is still mounted under it"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

echo "check_bare_machine: a minimal Debian $suite root in $root (debootstrap, from $mirror)"
if ! debootstrap --variant=minbase "$suite" "$root" "$mirror" > "$work/debootstrap.log" 2>&1; then
  tail -20 "$work/debootstrap.log"
  cannot "debootstrap could not make a Debian root here (its log above)"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
# A network that re-signs TLS hands its machines a local CA certificate; a new machine on it has
# that certificate too (Debian's ca-certificates, which git brings, picks it up on install).
if compgen -G "/usr/local/share/ca-certificates/*.crt" > /dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi
mount -t proc proc "$root/proc" || cannot "cannot mount /proc in the Debian root"

in_root() {
  chroot "$root" env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive bash -c "$1"
}
echo "check_bare_machine: git and make, what the README asks of a fresh machine"
if ! in_root "apt-get update -q && apt-get install -y -q --no-install-recommends git make" > "$work/git-make.log" 2>&1; then
  tail -20 "$work/git-make.log"
  echo "check_bare_machine: FAILED: apt-get could not install git and make in the Debian root"
  exit 1
fi

commit=$(git -C "$repo" rev-parse HEAD)
echo "check_bare_machine: a clone of $commit (the committed HEAD; uncommitted changes are not in it)"
git -C "$repo" bundle create "$work/head.bundle" HEAD > /dev/null 2>&1
cp "$work/head.bundle" "$root/root/head.bundle"
in_root "git clone -q /root/head.bundle /root/epigemm && git -C /root/epigemm -c advice.detachedHead=false checkout -q --detach $commit"

status=0
for command in "make run" "make test"; do
  echo "check_bare_machine: $command"
  start=$(date +%s)
  if in_root "cd /root/epigemm && $command" > "$work/${command// /-}.log" 2>&1; then
    echo "check_bare_machine: $command succeeded in $(($(date +%s) - start)) s:"
    grep -E "^result: |tests passed, .* out of|^[0-9]+ passed" "$work/${command// /-}.log" | sed 's/^/  /' || true
  else
    echo "check_bare_machine: FAILED: $command, after $(($(date +%s) - start)) s; its last lines:"
    tail -40 "$work/${command// /-}.log" | sed 's/^/  /'
    status=1
    break
  fi
done
[ "$status" = 0 ] && echo "check_bare_machine: both commands of the README work on a fresh Debian $suite machine"
exit "$status"
