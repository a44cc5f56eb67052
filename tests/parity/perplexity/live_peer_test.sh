#!/usr/bin/env bash
# ctest: `minfer perplexity` (PPL, and KLD through a base file) against llama.cpp's, computed now from the
# llamacpp peer's log-softmax (../shared/peer) on a tiny random-weight model generated here; the committed
# comparison on the fixture models is tests/parity/perplexity_parity_test.cpp. Skips (exit 77) when node,
# python3 or the peer install is absent (../shared/peer/install.sh installs it; this test never downloads).
# Usage: live_peer_test.sh MINFER_BINARY PEER_SCRIPT
set -uo pipefail
minfer="$1"; peer="$2"
home="${LLAMACPP_PEER_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/llamacpp-peer}"
if ! command -v node >/dev/null || ! command -v python3 >/dev/null; then echo "SKIP: node or python3 not found"; exit 77; fi
if [ ! -f "$peer" ] || [ ! -f "$home/node_modules/node-llama-cpp/dist/index.js" ]; then
  echo "SKIP: the llamacpp peer is not installed ($peer, $home; run ../shared/peer/install.sh)"; exit 77
fi
timeout 240 python3 "$(dirname "$0")/make_refs.py" --live "$minfer" "$peer"
