#!/usr/bin/env bash
# Installs the pinned official `openai` npm client (tests/server/openai_client/package.json) into a
# project-local folder, for the server's client test. Never global. Without node/npm it says so and exits 0
# (the test then skips). Usage: scripts/install_openai_client.sh [DEST] (default build/openai_client).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-$root/build/openai_client}"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "install_openai_client: node/npm not found; the openai client test will be skipped"
  exit 0
fi
mkdir -p "$dest"
cp "$root/tests/server/openai_client/package.json" "$root/tests/server/openai_client/client_test.mjs" "$dest/"
if [ -f "$dest/node_modules/openai/package.json" ] && grep -q '"version": "4.95.0"' "$dest/node_modules/openai/package.json"; then
  exit 0
fi
(cd "$dest" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
echo "install_openai_client: openai $(node -p "require('$dest/node_modules/openai/package.json').version") in $dest"
