#!/usr/bin/env bash
# Speculative decoding in the server on the trained pair (models/trained/), for docs/PERFORMANCE.md:
# `minfer serve` with the target in F16 and Q8_0, plain and with the trained draft (fixed depth and
# adaptive), the target's own Q4_0 and prompt lookup, driven by scripts/bench_server.py with 1 and 4
# streaming clients (greedy, prompts cut from the held-out text). The model's context is 512 tokens and the
# server's slots share it, so requests are short: about 48 prompt tokens and 64 generated.
# Usage: scripts/train/bench_server_spec.sh [-r REQUESTS_PER_CLIENT] [-t THREADS]
set -euo pipefail
cd "$(dirname "$0")/../.."
requests=3 threads=2
while getopts "r:t:" o; do
  case "$o" in r) requests="$OPTARG" ;; t) threads="$OPTARG" ;; *) exit 2 ;; esac
done
MINFER=build/release/src/cli/minfer
dir=models/trained
draft="$dir/tinyqwen3-draft-1m-q8_0.gguf"
q4="build/spec/tinyqwen3-8m-q4_0.gguf"
mkdir -p build/spec
[ -f "$q4" ] || "$MINFER" quantize "$dir/tinyqwen3-8m-f16.gguf" "$q4" --type q4_0 >/dev/null
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $threads threads, $requests requests per client"
export THREADS="$threads"
export BENCH_ARGS="--scenario concurrency --clients 1,4 --text $dir/heldout.txt --prompt-tokens 48 --gen-tokens 64 --requests $requests --json"
for t in f16 q8_0; do
  target="$dir/tinyqwen3-8m-$t.gguf"
  for mode in plain "--spec-draft $draft --spec-draft-n 3" "--spec-draft $draft --spec-draft-n 8 --spec-draft-adaptive" \
              "--spec-draft $q4 --spec-draft-n 4" "--spec-lookup 4"; do
    extra=(); [ "$mode" = plain ] || read -r -a extra <<< "$mode"
    out=$(bash scripts/bench_server.sh "$target" "${extra[@]}" 2>/dev/null | sed -n '/^{/,$p')
    row=$(python3 -c 'import json,sys; c=json.load(sys.stdin)["concurrency"]
print(" | ".join("%s tok/s, %s failed" % (c[k]["tok_s"], c[k]["failed"]) for k in ("1", "4")))' <<< "$out")
    echo "| $t | ${mode/#--spec-draft $draft/trained draft} | $row |"
  done
done
