#!/usr/bin/env bash
# Speculative decoding on the bench models (scripts/make_bench_models.sh), for docs/PERFORMANCE.md:
# the F16 target with its own Q4_0 and Q8_0 quantizations as drafts at depths 1-8 and adaptive, prompt
# lookup, and specverify's amortization table. Each `bench --spec-*` row times greedy generation with and
# without speculation in the same run (same output, checked), so the speedup is a same-run ratio.
# Usage: scripts/bench_spec.sh [-n TOKENS] [-r REPS] [-t THREADS] [-d "1 2 4 8"]
set -euo pipefail
cd "$(dirname "$0")/.."
n=64 reps=2 threads=2 depths="1 2 3 4 5 6 7 8"
while getopts "n:r:t:d:" o; do
  case "$o" in n) n="$OPTARG" ;; r) reps="$OPTARG" ;; t) threads="$OPTARG" ;; d) depths="$OPTARG" ;; *) exit 2 ;; esac
done
MINFER=build/release/src/cli/minfer
dir=models/bench
target="$dir/qwen2.5-0.5b-f16.gguf"
for f in "$target" "$dir/qwen2.5-0.5b-q4_0.gguf" "$dir/qwen2.5-0.5b-q8_0.gguf"; do
  [ -f "$f" ] || { echo "bench_spec: $f missing: run scripts/make_bench_models.sh" >&2; exit 1; }
done
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $threads threads, tg$n greedy, $reps reps"
run() { "$MINFER" bench "$target" -p 0 -n "$n" -r "$reps" -t "$threads" "$@" | grep 'spec'; }
for draft in q4_0 q8_0; do
  for d in $depths; do run --spec-draft "$dir/qwen2.5-0.5b-$draft.gguf" --spec-draft-n "$d"; done
  run --spec-draft "$dir/qwen2.5-0.5b-$draft.gguf" --spec-draft-n 8 --spec-draft-adaptive
done
for d in 2 4 8; do run --spec-lookup "$d"; done
"$MINFER" specverify "$target" -p 512 -r 10 -t "$threads"
