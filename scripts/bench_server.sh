#!/usr/bin/env bash
# Server benchmark: starts `minfer serve` on the 0.5B Q8_0 bench model (scripts/make_bench_models.sh) and
# drives it with scripts/bench_server.py (1, 4, 8 streaming clients; ITL while a 2,000-token prompt is
# admitted; TTFT with a shared 1,000-token prefix). Not a test: numbers go to docs/PERFORMANCE.md.
# Usage: scripts/bench_server.sh [MODEL.gguf] [extra serve flags...]   (env PORT, THREADS, and BENCH_ARGS for
#   scripts/bench_server.py, e.g. BENCH_ARGS="--scenario admission")
set -euo pipefail
cd "$(dirname "$0")/.."
MINFER=build/release/src/cli/minfer
[ -x "$MINFER" ] || bash scripts/build.sh release >/dev/null
model="${1:-models/bench/qwen2.5-0.5b-q8_0.gguf}"
shift || true
[ -f "$model" ] || bash scripts/make_bench_models.sh >/dev/null
port="${PORT:-18080}"
"$MINFER" serve "$model" --port "$port" --n-slots 8 -c 8192 -t "${THREADS:-$(nproc)}" "$@" &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  kill -0 $server 2>/dev/null || { echo "bench_server: the server exited" >&2; exit 1; }
  sleep 0.2
done
lscpu | grep 'Model name' | sed 's/  */ /g'
python3 scripts/bench_server.py --url "http://127.0.0.1:$port" ${BENCH_ARGS:-}
