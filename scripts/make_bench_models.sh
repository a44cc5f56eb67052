#!/usr/bin/env bash
# Writes the benchmark models (deterministic random weights, real Qwen vocabularies from ../shared) into
# models/bench/: Qwen2.5-0.5B- and Qwen3-0.6B-shaped, in F16, Q8_0, Q4_0 and Q4_K_M (~3.3 GB in all).
# llama.cpp loads the same files, so `minfer bench` and the peer can be run side by side.
# Usage: scripts/make_bench_models.sh [--big] [out_dir]   (tests never need these files)
#   --big: also Q4_K_M files written directly (no f16 intermediate): a Qwen2.5-7B shape (~4.4 GB), a
#   Llama-3.1-8B shape with the Llama 3 vocabulary (~4.6 GB) and a Qwen3-30B-A3B shape (~17 GB; 128 experts,
#   8 per token). MINFER_BENCH_BIG="qwen2.5-7b llama-3.1-8b" picks some of them.
set -euo pipefail
cd "$(dirname "$0")/.."
big=0
if [ "${1:-}" = "--big" ]; then
  big=1
  shift
fi
out="${1:-models/bench}"
vocab_dir="${MINFER_FIXTURES_DIR:-../shared/fixtures}/tokenizer"
MINFER=build/release/src/cli/minfer
[ -x "$MINFER" ] || bash scripts/build.sh release >/dev/null
mkdir -p "$out"
for spec in "qwen2.5-0.5b:qwen2" "qwen3-0.6b:qwen3"; do
  preset="${spec%%:*}"
  vocab="$vocab_dir/${spec##*:}-vocab.gguf"
  f16="$out/$preset-f16.gguf"
  [ -f "$f16" ] || "$MINFER" make-model "$f16" --preset "$preset" --type f16 --seed 1 --vocab "$vocab"
  for type in q8_0 q4_0 q4_K_M; do
    dst="$out/$preset-$(echo "$type" | tr 'A-Z' 'a-z').gguf"
    [ -f "$dst" ] || "$MINFER" quantize "$f16" "$dst" --type "$type" >/dev/null
    echo "wrote $dst"
  done
done
if [ "$big" = 1 ]; then
  declare -A big_vocab=([qwen2.5-7b]="$vocab_dir/qwen2-vocab.gguf"
                        [llama-3.1-8b]="tests/tokenizer/vocab/llama3-vocab.gguf"
                        [qwen3-30b-a3b]="$vocab_dir/qwen3-vocab.gguf")
  for preset in ${MINFER_BENCH_BIG:-qwen2.5-7b llama-3.1-8b qwen3-30b-a3b}; do
    [ -n "${big_vocab[$preset]:-}" ] || { echo "make_bench_models: unknown big preset $preset" >&2; exit 2; }
    dst="$out/$preset-q4_k_m.gguf"
    [ -f "$dst" ] || "$MINFER" make-model "$dst" --preset "$preset" --type q4_K_M --seed 1 \
      --vocab "${big_vocab[$preset]}"
    echo "wrote $dst"
  done
fi
