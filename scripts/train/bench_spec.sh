#!/usr/bin/env bash
# Speculative decoding on the trained pair (models/trained/), for docs/PERFORMANCE.md: the target in F16 and
# Q8_0, with the trained 1.45M draft, with the target's own Q4_0, and with prompt lookup; greedy through
# `minfer bench` (plain and speculative in the same run, same output checked) and sampled at temperature 0.8
# through `minfer run` (tok/s of generation, acceptance by draft position). End of text is forbidden
# (<|endoftext|> 8192, <|im_end|> 8194) so every run generates all N tokens.
# Usage: scripts/train/bench_spec.sh [-n TOKENS] [-r REPS] [-t THREADS]
set -euo pipefail
cd "$(dirname "$0")/../.."
n=128 reps=3 threads=2
while getopts "n:r:t:" o; do
  case "$o" in n) n="$OPTARG" ;; r) reps="$OPTARG" ;; t) threads="$OPTARG" ;; *) exit 2 ;; esac
done
MINFER=build/release/src/cli/minfer
dir=models/trained
draft="$dir/tinyqwen3-draft-1m-q8_0.gguf"
q4="build/spec/tinyqwen3-8m-q4_0.gguf"
mkdir -p build/spec
[ -f "$q4" ] || "$MINFER" quantize "$dir/tinyqwen3-8m-f16.gguf" "$q4" --type q4_0 >/dev/null
prompt="In the beginning God created the heaven and the earth. And the earth was without form, and void;"
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $threads threads, tg$n, $reps reps"
echo "prompt: $prompt"
for t in f16 q8_0; do
  target="$dir/tinyqwen3-8m-$t.gguf"
  echo "## target $t, greedy (minfer bench)"
  b() { "$MINFER" bench "$target" -p 0 -n "$n" -r "$reps" -t "$threads" --spec-prompt "$prompt" "$@" | grep spec; }
  for d in 1 2 3 4 6 8; do b --spec-draft "$draft" --spec-draft-n "$d"; done
  b --spec-draft "$draft" --spec-draft-n 8 --spec-draft-adaptive
  for d in 2 4; do b --spec-draft "$q4" --spec-draft-n "$d"; done
  b --spec-draft "$q4" --spec-draft-n 8 --spec-draft-adaptive
  b --spec-lookup 4
  echo "## target $t, temperature 0.8 (minfer run, seeds 1-3, no chat template)"
  for mode in plain "--spec-draft $draft --spec-draft-n 3" "--spec-draft $draft --spec-draft-n 8 --spec-draft-adaptive" \
              "--spec-draft $q4 --spec-draft-n 4"; do
    for seed in 1 2 3; do
      extra=(); [ "$mode" = plain ] || read -r -a extra <<< "$mode"
      out=$("$MINFER" "$target" "$prompt" --no-template -n "$n" --temp 0.8 --seed "$seed" -t "$threads" \
            --logit-bias 8192:-100,8194:-100 -o json "${extra[@]}" 2>&1)
      tps=$(echo "$out" | grep -o '"generate_tps": [0-9.]*' | cut -d' ' -f2)
      spec=$(echo "$out" | grep -o 'speculative: .*' | head -1 || true)
      echo "$mode | seed $seed | $tps tok/s | $spec"
    done
  done
done
