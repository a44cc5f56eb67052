#!/usr/bin/env bash
# The latency a cold load adds to the first request for a model. Warm: `minfer serve MODEL` (loaded at
# start), one untimed request, then ROUNDS timed ones. Cold: `minfer serve MODEL --keep-alive 0`, which
# unloads the model as soon as it is idle, so each timed request (sent once /v1/models says unloaded)
# loads it again. The file stays in the page cache: this is the process's load (mmap, weight preparation,
# KV cache, batcher), not the disk's. Every request is a 1-token chat answer with a different prompt of the
# same length (no prefix reuse). Prints per-round rows and the router's minfer_model_load_seconds.
# Usage: scripts/bench_cold_load.sh MODEL.gguf [THREADS=2] [ROUNDS=5]. Run it alone on a quiet machine.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
model="$1"; threads="${2:-2}"; rounds="${3:-5}"
minfer="$root/build/release/src/cli/minfer"
work="$(mktemp -d)"
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
start_server() {  # start_server EXTRA...: sets pid and url
  "$minfer" serve "$model" --port 0 -t "$threads" -c 4096 "$@" >"$work/serve.log" 2>&1 &
  pid=$!
  local port=""
  for _ in $(seq 1 1200); do
    port="$(sed -n 's#.*listening on http://127.0.0.1:\([0-9]*\).*#\1#p' "$work/serve.log")"
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { cat "$work/serve.log"; exit 1; }
  url="http://127.0.0.1:$port"
}
stop_server() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }
ask() {  # ask WORD: seconds of one chat request generating 1 token
  local start end
  start=$(date +%s.%N)
  curl -sS --fail-with-body "$url/v1/chat/completions" -H 'Content-Type: application/json' \
    -d "{\"messages\":[{\"role\":\"user\",\"content\":\"$1 tell me one thing\"}],\"max_tokens\":1,\"temperature\":0}" >/dev/null
  end=$(date +%s.%N)
  echo "$end - $start" | bc -l
}
start_server
ask w0 >/dev/null
warm=()
for r in $(seq 1 "$rounds"); do warm+=("$(ask "w$r")"); done
stop_server
start_server --keep-alive 0
echo "| round | warm request s | cold request s | cold - warm s | minfer_model_load_seconds |"
echo "|---|---|---|---|---|"
for r in $(seq 1 "$rounds"); do
  for _ in $(seq 1 600); do curl -sS "$url/v1/models" | grep -q '"loaded":false' && break; sleep 0.05; done
  cold=$(ask "c$r")
  secs=$(curl -sS "$url/metrics" | sed -n 's/^minfer_model_load_seconds \(.*\)/\1/p')
  python3 -c "import sys; w,c,s=map(float,sys.argv[2:5]); print(f'| {sys.argv[1]} | {w:.3f} | {c:.3f} | {c-w:.3f} | {s:.3f} |')" \
    "$r" "${warm[$((r-1))]}" "$cold" "$secs"
done
stop_server
