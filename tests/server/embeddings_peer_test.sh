#!/usr/bin/env bash
# ctest: minfer's /v1/embeddings equal llama.cpp's (node-llama-cpp's embedding context from the llamacpp-peer
# install, ../shared/peer) on a tiny random-weight embedding model generated here with a fixed seed. Runs the
# peer live rather than comparing with committed numbers, so a change on either side is seen; skips (exit 77)
# when node or the peer install is absent (../shared/peer/install.sh installs it; this test never downloads).
# Usage: embeddings_peer_test.sh MINFER_BINARY WORK_DIR
set -uo pipefail
minfer="$1"; work="$2"
home="${LLAMACPP_PEER_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/llamacpp-peer}"
if ! command -v node >/dev/null; then echo "SKIP: node not found"; exit 77; fi
if [ ! -f "$home/node_modules/node-llama-cpp/dist/index.js" ]; then
  echo "SKIP: node-llama-cpp (the llamacpp peer) is not installed in $home (run ../shared/peer/install.sh)"; exit 77
fi
mkdir -p "$work"
model="$work/peer-embedding.gguf"
"$minfer" make-model "$model" --preset tiny-qwen3-embedding --seed 26 >/dev/null || exit 1
log="$work/peer-embedding-serve.log"
# An embedding model (its GGUF declares qwen3.pooling_type = last) serves /v1/embeddings without --embeddings.
"$minfer" serve "$model" --port 0 -t 1 -c 512 >"$log" 2>&1 &
pid=$!
port=""
for _ in $(seq 1 300); do
  port="$(sed -n 's#.*listening on http://127.0.0.1:\([0-9]*\).*#\1#p' "$log")"
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$port" ]; then echo "server did not start:"; cat "$log"; kill "$pid" 2>/dev/null; exit 1; fi
MINFER_BASE_URL="http://127.0.0.1:$port" MODEL="$model" LLAMACPP_PEER_HOME="$home" \
  timeout 120 node "$(dirname "$0")/embeddings_peer/peer_embed.mjs"
rc=$?
kill -TERM "$pid"
wait "$pid"
exit $rc
