#!/usr/bin/env bash
# Installs everything minfer needs to build and test, from Debian packages only. Idempotent: when every
# package is already installed it does nothing (no apt-get update, no network).
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ pkg-config git
  libfmt-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libutf8proc-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev clang-format
  libssl-dev libcurl4-openssl-dev
  libedit-dev
)

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
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
