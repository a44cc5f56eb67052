#!/usr/bin/env bash
# Installs everything minfer needs, from Debian packages only. Idempotent: when every package is already
# installed it does nothing (no apt-get update, no network).
#   scripts/setup.sh         what the test command needs (README command 2): build, run and every test tier
#   scripts/setup.sh --run   only what building and running needs (README command 1, scripts/demo.sh)
set -euo pipefail

# Building and running: the compiler, the libraries minfer links, GoogleTest/Benchmark (the release preset
# builds the tests beside the binary), and the Vulkan headers + GLSL compiler so a GPU is used when present.
PACKAGES=(
  cmake ninja-build g++ pkg-config git
  libfmt-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libutf8proc-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  libssl-dev libcurl4-openssl-dev
  libedit-dev
  ccache
  libvulkan-dev glslc
)
if [ "${1:-}" != "--run" ]; then
  # Testing: clang for the fuzz targets and clang-format; Mesa's lavapipe (a Vulkan device that runs on
  # the CPU) so the Vulkan tests execute every shader, vulkaninfo for diagnosis, and the Khronos validation
  # layer for the `vulkan` tier (scripts/tiers.sh; its second driver, SwiftShader, comes with chromium).
  PACKAGES+=(clang libclang-rt-14-dev clang-format mesa-vulkan-drivers vulkan-tools vulkan-validationlayers)
  # The visualizer's browser test (headless, through puppeteer-core) and the dump files' numpy check.
  PACKAGES+=(chromium python3-numpy)
  # The `neon` tier (scripts/tiers.sh): Debian's aarch64 cross compiler, qemu-user to run its binaries,
  # and the arm64 builds of the libraries the kernel / engine tests link (multiarch: needs the arm64 arch).
  PACKAGES+=(
    g++-aarch64-linux-gnu qemu-user
    libgtest-dev:arm64 libgmock-dev:arm64 libfmt-dev:arm64 libutf8proc-dev:arm64 libssl-dev:arm64
  )
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
if [[ " ${missing[*]}" == *":arm64"* ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $SUDO dpkg --add-architecture arm64
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
