#!/usr/bin/env bash
# Installs the pinned npm packages of the tests that drive minfer from Node.js into project-local folders
# (never global): the official `openai` and `@anthropic-ai/sdk` clients for the server tests
# (build/openai_client, build/anthropic_client) and
# `puppeteer-core` for the visualizer's browser test (build/puppeteer; never a bundled browser: the test
# drives Debian's chromium). Each folder gets its package.json from tests/; an install that already
# holds the pinned version is kept. Without node/npm it says so and exits 0 (the tests then skip).
# Usage: scripts/install_npm_tests.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "install_npm_tests: node/npm not found; the openai/anthropic client and viz browser tests will be skipped"
  exit 0
fi

install() {  # install PACKAGE DEST FILES...: FILES (package.json first) copied to DEST, then npm install
  local package="$1" dest="$2" want
  shift 2
  mkdir -p "$dest"
  cp "$@" "$dest/"
  want="$(node -p "require('$dest/package.json').dependencies['$package']")"
  if [ -f "$dest/node_modules/$package/package.json" ] &&
     [ "$(node -p "require('$dest/node_modules/$package/package.json').version")" = "$want" ]; then
    return 0
  fi
  (cd "$dest" && PUPPETEER_SKIP_DOWNLOAD=1 npm install --no-audit --no-fund --loglevel=error >/dev/null)
  echo "install_npm_tests: $package $want in $dest"
}

install openai "$root/build/openai_client" \
  "$root/tests/server/openai_client/package.json" "$root/tests/server/openai_client/client_test.mjs"
install @anthropic-ai/sdk "$root/build/anthropic_client" \
  "$root/tests/server/anthropic_client/package.json" "$root/tests/server/anthropic_client/client_test.mjs"
install puppeteer-core "$root/build/puppeteer" "$root/tests/viz/browser/package.json"
