#!/usr/bin/env bash
# Installs the pinned puppeteer-core (tests/viz/browser/package.json) into a project-local folder for the
# visualizer's browser test. Never global, never a bundled browser (PUPPETEER_SKIP_DOWNLOAD): the test
# drives Debian's chromium. Without node/npm it says so and exits 0 (the test then skips).
# Usage: scripts/install_puppeteer.sh [DEST] (default build/puppeteer).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-$root/build/puppeteer}"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "install_puppeteer: node/npm not found; the viz browser test will be skipped"
  exit 0
fi
mkdir -p "$dest"
cp "$root/tests/viz/browser/package.json" "$dest/"
want="$(node -p "require('$dest/package.json').dependencies['puppeteer-core']")"
if [ -f "$dest/node_modules/puppeteer-core/package.json" ] &&
   [ "$(node -p "require('$dest/node_modules/puppeteer-core/package.json').version")" = "$want" ]; then
  exit 0
fi
(cd "$dest" && PUPPETEER_SKIP_DOWNLOAD=1 npm install --no-audit --no-fund --loglevel=error >/dev/null)
echo "install_puppeteer: puppeteer-core $want in $dest"
