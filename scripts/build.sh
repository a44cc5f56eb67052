#!/usr/bin/env bash
# Configures and builds one CMake preset (default: release): every target, or only the TARGETs named.
# Usage: scripts/build.sh [preset] [TARGET ...]
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
shift || true
source scripts/use_ccache.sh
cmake --preset "$preset" >/dev/null
if [ $# -gt 0 ]; then
  cmake --build --preset "$preset" --target "$@"
else
  cmake --build --preset "$preset"
fi
