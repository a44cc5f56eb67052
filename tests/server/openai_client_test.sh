#!/usr/bin/env bash
# ctest: the official openai npm client against `minfer serve` on a loopback ephemeral port with a tiny
# generated model. Skips (exit 77) when node is absent or the client is not installed
# (scripts/install_npm_tests.sh does that; this test never downloads anything).
# Usage: openai_client_test.sh MINFER_BINARY CLIENT_DIR WORK_DIR
set -uo pipefail
minfer="$1"; client="$2"; work="$3"
if ! command -v node >/dev/null; then echo "SKIP: node not found"; exit 77; fi
if [ ! -f "$client/node_modules/openai/package.json" ]; then
  echo "SKIP: openai npm client not installed in $client (run scripts/install_npm_tests.sh)"; exit 77
fi
cp "$(dirname "$0")/openai_client/client_test.mjs" "$client/"
mkdir -p "$work"
model="$work/npm-tiny.gguf"
"$minfer" make-model "$model" --preset tiny-qwen3 >/dev/null || exit 1
log="$work/npm-serve.log"
"$minfer" serve "$model" --port 0 -t 1 --alias tiny --embeddings --pooling mean >"$log" 2>&1 &
pid=$!
port=""
for _ in $(seq 1 300); do
  port="$(sed -n 's#.*listening on http://127.0.0.1:\([0-9]*\).*#\1#p' "$log")"
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$port" ]; then echo "server did not start:"; cat "$log"; kill "$pid" 2>/dev/null; exit 1; fi
MINFER_BASE_URL="http://127.0.0.1:$port/v1" MINFER_MODEL=tiny timeout 120 node "$client/client_test.mjs"
rc=$?
kill -TERM "$pid"
wait "$pid"
src=$?
if [ "$src" -ne 0 ]; then echo "minfer serve exited $src after SIGTERM"; cat "$log"; exit 1; fi
exit $rc
