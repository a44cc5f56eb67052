#!/usr/bin/env bash
# Embeddings per second through `minfer serve`'s POST /v1/embeddings: requests of 1 and of 32 inputs of 128
# token ids each, on a random-weight Qwen3-Embedding-0.6B-shaped model (make-model qwen3-embedding-0.6b).
# Prints one markdown row per batch size: embeddings/s and input tokens/s over REPS timed requests (after
# one untimed warm-up). Run it alone on a quiet machine.
# Usage: scripts/bench_embeddings.sh [TYPE=q8_0] [THREADS=2] [REPS=3]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
type="${1:-q8_0}"; threads="${2:-2}"; reps="${3:-3}"
minfer="$root/build/release/src/cli/minfer"
[ -x "$minfer" ] || minfer="$(find "$root/build/release" -type f -name minfer -perm -u+x | head -1)"
work="$(mktemp -d)"
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
model="$work/qwen3-embedding-0.6b-$type.gguf"
"$minfer" make-model "$model" --preset qwen3-embedding-0.6b --type "$type" >/dev/null
"$minfer" serve "$model" --port 0 -t "$threads" -c 4096 >"$work/serve.log" 2>&1 &
pid=$!
port=""
for _ in $(seq 1 600); do
  port="$(sed -n 's#.*listening on http://127.0.0.1:\([0-9]*\).*#\1#p' "$work/serve.log")"
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$work/serve.log"; exit 1; }
body() {  # body N: N inputs of 128 token ids each
  python3 -c "import json,sys; n=int(sys.argv[1]); print(json.dumps({'input': [[3 + (i*131 + j*7) % 250 for j in range(128)] for i in range(n)]}))" "$1"
}
echo "| inputs x tokens | embeddings/s | input tokens/s | s/request |"
echo "|---|---|---|---|"
for n in 1 32; do
  body "$n" >"$work/b$n.json"
  curl -sS --fail-with-body "http://127.0.0.1:$port/v1/embeddings" -H 'Content-Type: application/json' -d @"$work/b$n.json" >/dev/null
  start=$(date +%s.%N)
  for _ in $(seq 1 "$reps"); do
    curl -sS --fail-with-body "http://127.0.0.1:$port/v1/embeddings" -H 'Content-Type: application/json' -d @"$work/b$n.json" >/dev/null
  done
  end=$(date +%s.%N)
  python3 -c "import sys; n,r,t=int(sys.argv[1]),int(sys.argv[2]),float(sys.argv[3]); print(f'| {n} x 128 | {n*r/t:.2f} | {n*r*128/t:.0f} | {t/r:.3f} |')" "$n" "$reps" "$(echo "$end - $start" | bc -l)"
done
