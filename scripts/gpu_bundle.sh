#!/usr/bin/env bash
# Packs what scripts/gpu_check.sh needs on a GPU machine that cannot build minfer or reach a package
# mirror (the session's lent `device` machine: no glslc, no apt, and ../shared does not travel there), as
# one compressed file small enough to travel beside the checkout:
#   bin/      minfer, test_parity and test_backend_vulkan (every shader against the CPU) from this
#             machine's release build (no -march: they dispatch per CPU);
#   lib/      the shared libraries they load beyond glibc and libstdc++, and Debian's Vulkan loader
#             (libvulkan.so.1, which minfer dlopens);
#   lib-cxx/  this machine's libstdc++ and libgcc_s, used there only when the machine's own lack the
#             GLIBCXX version the binaries need;
#   debs/     Debian's libvulkan1 and glvnd packages, unpacked there only when the machine has no Vulkan
#             loader (the recipe of the device tool's README: NVIDIA's ICD needs libGLdispatch);
#   fixtures/ a fixture model (qwen2-mini Q4_K_M) and the llama.cpp references the parity step reads, and Qwen2.5's
#             vocabulary for the bench models (its output head is a real 0.5B's and 7B's).
# Usage: scripts/gpu_bundle.sh [--out FILE] (default gpu-bundle/minfer-gpu.tar.xz; gpu-bundle/ is ignored
# by git so it can be carried). Then, on the GPU machine, in the checkout:
#   bash scripts/gpu_check.sh --bundle gpu-bundle/minfer-gpu.tar.xz --models /tmp/models --logs /tmp/logs
# (the device tool's call: docs/BACKENDS.md, "Running the GPU check on a lent machine").
set -euo pipefail
cd "$(dirname "$0")/.."

out="gpu-bundle/minfer-gpu.tar.xz"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    *) echo "gpu_bundle: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
fixtures="${MINFER_FIXTURES_DIR:-../shared/fixtures}"
[ -d "$fixtures/models/refs" ] || { echo "gpu_bundle: no fixtures at $fixtures" >&2; exit 1; }

source scripts/use_ccache.sh 2>/dev/null || true
cmake --preset release >/dev/null
cmake --build --preset release --target minfer test_parity test_backend_vulkan >/dev/null
grep -q '^MINFER_VULKAN:BOOL=ON' build/release/CMakeCache.txt ||
  { echo "gpu_bundle: this release build has no Vulkan backend (libvulkan-dev, glslc: scripts/setup.sh)" >&2; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,lib,lib-cxx,debs,fixtures/models/refs}
bins=(build/release/src/cli/minfer build/release/tests/parity/test_parity
  build/release/tests/backend_vulkan/test_backend_vulkan)
for b in "${bins[@]}"; do strip --strip-unneeded -o "$stage/bin/$(basename "$b")" "$b"; done

# glibc's own libraries (and the dynamic loader) are the machine's; everything else the binaries load
# comes along, resolved as this machine resolves it.
glibc='^(libc|libm|libdl|libpthread|librt|libresolv|ld-linux-x86-64)\.so'
ldd "${bins[@]}" | awk '/=> \//{print $1, $3}' | sort -u | while read -r name path; do
  if [[ "$name" =~ $glibc ]]; then continue; fi
  case "$name" in
    libstdc++.so.*|libgcc_s.so.*) cp -L "$path" "$stage/lib-cxx/$name" ;;
    *) cp -L "$path" "$stage/lib/$name" ;;
  esac
done
loader=$(ldconfig -p | awk '/libvulkan\.so\.1 .*x86-64/{print $NF; exit}')
[ -n "$loader" ] || { echo "gpu_bundle: no libvulkan.so.1 here (apt-get install libvulkan1)" >&2; exit 1; }
cp -L "$loader" "$stage/lib/libvulkan.so.1"

chmod 755 "$stage" && chmod 777 "$stage/debs"  # apt-get download fetches as its own user, _apt
(cd "$stage/debs" && apt-get download -q libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 >/dev/null)

for m in qwen2-mini-q4_k_m; do  # one model: a second would not fit in what travels (below)
  cp "$fixtures/models/$m.gguf" "$stage/fixtures/models/"
  cp -r "$fixtures/models/refs/$m" "$stage/fixtures/models/refs/"
done
cp "$fixtures/models/refs/summary.json" "$stage/fixtures/models/refs/"
mkdir -p "$stage/fixtures/tokenizer"  # the bench models' vocabulary: Qwen2.5's 151,936 tokens
cp "$fixtures/tokenizer/qwen2-vocab.gguf" "$stage/fixtures/tokenizer/"
git log -1 --format='minfer %h (%cs)' >"$stage/VERSION" 2>/dev/null || echo "minfer (no git)" >"$stage/VERSION"

mkdir -p "$(dirname "$out")"
tar -C "$stage" -cJf "$out" .
# What travels to the device machine is the checkout's tracked files plus what is carried: 64 MiB in all.
tracked=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
bundle=$(stat -c %s "$out")
total_mib=$(( (tracked + bundle) / 1048576 ))
echo "gpu_bundle: $out ($(( bundle / 1048576 )) MiB; with the checkout's tracked files ${total_mib} MiB of the 64 MiB that travel; $(cat "$stage/VERSION"))"
[ "$total_mib" -lt 64 ] || { echo "gpu_bundle: too large to travel with the checkout" >&2; exit 1; }
