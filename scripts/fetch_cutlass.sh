#!/usr/bin/env bash
# Puts CUTLASS's C++ headers where the build finds them (EPIGEMM_CUTLASS_DIR's default,
# .deps/cutlass-4.2.0.0/), from the pinned PyPI wheel nvidia-cutlass==4.2.0.0 (BSD-3-Clause). The
# wheel's cutlass_library/source/include holds cute and cutlass (the sm90 collective builders, the
# epilogue fusions) and cutlass_library/source/tools/util/include the utilities; nothing else of it
# is used, and nothing of it is committed.
#
#   .deps/nvidia_cutlass-4.2.0.0-py3-none-any.whl   kept (carry it to a machine without network)
#   .deps/cutlass-4.2.0.0/include/                  cute/, cutlass/
#   .deps/cutlass-4.2.0.0/tools/util/include/       cutlass/util/
#
# Without the wheel in .deps/ it is downloaded with pip (--no-deps: the headers need none of the
# package's Python dependencies). Its sha256 is checked every time before it is extracted; a
# mismatch fails (exit 1). A failed download exits with 2: install_deps.sh then warns and goes on,
# and the build leaves the cutlass backend out. A finished extraction is marked by a stamp file
# and not repeated. No network is needed when the wheel is in .deps/ (the GPU machine).
set -euo pipefail
cd "$(dirname "$0")/.."

version=4.2.0.0
wheel_name=nvidia_cutlass-${version}-py3-none-any.whl
wheel_sha256=f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6
deps_dir=.deps
target_dir=$deps_dir/cutlass-$version
stamp=$target_dir/.extracted-from-$wheel_sha256

if [ -f "$stamp" ]; then
  exit 0
fi
mkdir -p "$deps_dir"
if [ ! -f "$deps_dir/$wheel_name" ]; then
  echo "fetch_cutlass: downloading nvidia-cutlass==$version (the wheel only, --no-deps) into $deps_dir/"
  # Few retries and a short timeout: without network (the GPU machine) this fails in seconds.
  if ! python3 -m pip download --quiet --retries 1 --timeout 20 --no-deps --only-binary=:all: \
         --dest "$deps_dir" "nvidia-cutlass==$version" ||
     [ ! -f "$deps_dir/$wheel_name" ]; then
    echo "fetch_cutlass: could not download nvidia-cutlass==$version; put $wheel_name into $deps_dir/" >&2
    exit 2
  fi
fi
actual_sha256=$(sha256sum "$deps_dir/$wheel_name" | cut -d' ' -f1)
if [ "$actual_sha256" != "$wheel_sha256" ]; then
  echo "fetch_cutlass: $deps_dir/$wheel_name has sha256 $actual_sha256; expected $wheel_sha256" >&2
  echo "fetch_cutlass: remove it and run again to download it afresh" >&2
  exit 1
fi
rm -rf "$target_dir"
mkdir -p "$target_dir"
# Only the two header trees, with the wheel's cutlass_library/source/ prefix taken off.
python3 - "$deps_dir/$wheel_name" "$target_dir" <<'EOF'
import os, shutil, sys, zipfile
wheel, target = sys.argv[1], sys.argv[2]
prefix = "cutlass_library/source/"
wanted = (prefix + "include/", prefix + "tools/util/include/")
count = 0
with zipfile.ZipFile(wheel) as archive:
    for member in archive.infolist():
        if member.is_dir() or not member.filename.startswith(wanted):
            continue
        relative = member.filename[len(prefix):]
        if relative.startswith("/") or ".." in relative.split("/"):
            sys.exit(f"fetch_cutlass: unexpected path in the wheel: {member.filename}")
        path = os.path.join(target, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with archive.open(member) as source, open(path, "wb") as sink:
            shutil.copyfileobj(source, sink)
        count += 1
if count == 0:
    sys.exit("fetch_cutlass: the wheel holds no cutlass_library/source/include")
print(f"fetch_cutlass: extracted {count} header files into {target}/")
EOF
touch "$stamp"
