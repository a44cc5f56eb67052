#!/usr/bin/env bash
# Trains minfer's demo model pair from scratch and writes the committed files under models/trained/:
# installs the Debian packages it needs, assembles the text, cuts the vocabulary, tokenizes with minfer,
# trains target + draft (scripts/train/train.py), and converts the checkpoints with `minfer convert`.
# Reproducible from the seed; about 55 minutes on 2 cores (AMD EPYC Zen 5). Not part of CI.
# Usage: scripts/train/run.sh [WORK_DIR]   (default build/train; STEPS, SEED override the recipe)
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK="${1:-build/train}"
STEPS="${STEPS:-800}"
SEED="${SEED:-1}"
PY=/usr/bin/python3  # Debian's interpreter: python3-torch is installed for it, not for a pyenv one
OUT=models/trained

# torch, numpy, OpenBLAS (Debian's torch otherwise runs on the reference BLAS: about 20x slower),
# matplotlib for the loss curve, and the text sources (see scripts/train/README.md).
PACKAGES=(python3-torch python3-numpy libopenblas0-pthread python3-matplotlib bible-kjv fortunes dict-devil)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
bash scripts/build.sh release >/dev/null
MINFER=build/release/src/cli/minfer

mkdir -p "$WORK" "$OUT"
$PY scripts/train/data.py "$WORK/data"
mkdir -p "$WORK/tokenizer"
$PY scripts/train/vocab.py ../shared/fixtures/hf/qwen3-tokenizer "$WORK/tokenizer" 8192 > "$WORK/tokenizer/specials.json"
# `convert --vocab-only` needs a config.json beside the tokenizer; the vocabulary is all it reads from it.
n_vocab=$($PY -c "import json; print(json.load(open('$WORK/tokenizer/specials.json'))['n_vocab'])")
echo "{\"architectures\": [\"Qwen3ForCausalLM\"], \"vocab_size\": $n_vocab}" > "$WORK/tokenizer/config.json"
"$MINFER" convert --vocab-only "$WORK/tokenizer" "$WORK/vocab.gguf"
to_u16='import json, sys, numpy as np; np.array(json.load(sys.stdin), dtype="<u2").tofile(sys.argv[1])'
# Training text parses the special tokens (document separators, chat turns); held-out text is plain prose.
"$MINFER" tokenize --ids "$WORK/vocab.gguf" - < "$WORK/data/train.txt" | $PY -c "$to_u16" "$WORK/train.u16"
"$MINFER" tokenize --ids --no-special "$WORK/vocab.gguf" - < "$WORK/data/heldout.txt" | $PY -c "$to_u16" "$WORK/heldout.u16"

$PY scripts/train/train.py --tokens "$WORK/train.u16" --heldout "$WORK/heldout.u16" \
  --tokenizer "$WORK/tokenizer" --specials "$WORK/tokenizer/specials.json" --out "$WORK/run" \
  --steps "$STEPS" --seed "$SEED"

"$MINFER" convert "$WORK/run/target" "$OUT/tinyqwen3-8m-f16.gguf" --outtype f16 --name tinyqwen3-8m
"$MINFER" convert "$WORK/run/target" "$OUT/tinyqwen3-8m-q8_0.gguf" --outtype q8_0 --name tinyqwen3-8m
"$MINFER" convert "$WORK/run/draft" "$OUT/tinyqwen3-draft-1m-q8_0.gguf" --outtype q8_0 --name tinyqwen3-draft-1m
cp "$WORK/run/train.log" "$WORK/run/loss.png" "$OUT/"
cp "$WORK/data/data.json" "$OUT/data.json"
cp "$WORK/data/heldout.txt" "$OUT/heldout.txt"
(cd "$OUT" && sha256sum ./*.gguf heldout.txt > MANIFEST.sha256)
echo "train: wrote $OUT"
