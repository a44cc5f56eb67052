#!/usr/bin/env bash
# ctest: the official @anthropic-ai/sdk npm client against `minfer serve --api-key` on a loopback ephemeral
# port with a tiny generated model (the Qwen3 tokenizer and template copied in when the fixtures hold
# them). Skips (exit 77) when node is absent or the client is not installed (scripts/install_npm_tests.sh
# does that; this test never downloads anything).
# Usage: anthropic_client_test.sh MINFER_BINARY CLIENT_DIR WORK_DIR [FIXTURES_DIR]
set -uo pipefail
minfer="$1"; client="$2"; work="$3"; fixtures="${MINFER_FIXTURES_DIR:-${4:-}}"
if ! command -v node >/dev/null; then echo "SKIP: node not found"; exit 77; fi
if [ ! -f "$client/node_modules/@anthropic-ai/sdk/package.json" ]; then
  echo "SKIP: @anthropic-ai/sdk npm client not installed in $client (run scripts/install_npm_tests.sh)"; exit 77
fi
cp "$(dirname "$0")/anthropic_client/client_test.mjs" "$client/"
mkdir -p "$work"
model="$work/anthropic-tiny.gguf"
vocab=()
if [ -n "$fixtures" ] && [ -f "$fixtures/tokenizer/qwen3-vocab.gguf" ]; then
  vocab=(--vocab "$fixtures/tokenizer/qwen3-vocab.gguf")
fi
"$minfer" make-model "$model" --preset tiny-qwen3 "${vocab[@]}" >/dev/null || exit 1
log="$work/anthropic-serve.log"
"$minfer" serve "$model" --port 0 -t 1 --alias tiny --api-key sekret >"$log" 2>&1 &
pid=$!
port=""
for _ in $(seq 1 300); do
  port="$(sed -n 's#.*listening on http://127.0.0.1:\([0-9]*\).*#\1#p' "$log")"
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$port" ]; then echo "server did not start:"; cat "$log"; kill "$pid" 2>/dev/null; exit 1; fi
MINFER_BASE_URL="http://127.0.0.1:$port" MINFER_MODEL=tiny MINFER_API_KEY=sekret timeout 120 node "$client/client_test.mjs"
rc=$?
kill -TERM "$pid"
wait "$pid"
src=$?
if [ "$src" -ne 0 ]; then echo "minfer serve exited $src after SIGTERM"; cat "$log"; exit 1; fi
if [ "$rc" -ne 0 ]; then echo "server log:"; tail -20 "$log"; fi
exit $rc
