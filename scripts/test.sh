#!/usr/bin/env bash
# README command 2: install, build, run the whole test suite (unit + parity against ../shared/fixtures,
# short libFuzzer runs of every untrusted-input parser, the asan / tsan / NEON-under-qemu / Vulkan tiers). Ends
# with ctest's summary and the parity case counts.
# Environment: FUZZ_SECONDS (default 30 per fuzzer; 0 skips the fuzz runs), MINFER_TIERS (default
# "asan tsan neon vulkan"; "none" skips), MINFER_FIXTURES_DIR, MINFER_FIXTURES_REQUIRED.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/use_ccache.sh
jobs="$(nproc)"

bash scripts/build.sh release

fuzz_seconds="${FUZZ_SECONDS:-30}"
if [ "$fuzz_seconds" != "0" ]; then
  # Every untrusted-input parser, FUZZ_SECONDS each (scripts/fuzz.sh: a crash, leak or timeout fails).
  # Only the fuzz targets: the rest of the tree is covered by the release build above.
  fuzzers=(gguf chat gbnf json_schema tokenizer chat_messages server_request safetensors)
  cmake --preset fuzz >/dev/null
  fuzz_log="$(mktemp)"
  cmake --build --preset fuzz --target fuzz_gguf_seeds "${fuzzers[@]/#/fuzz_}" >"$fuzz_log" 2>&1 \
    || { tail -50 "$fuzz_log"; exit 1; }
  rm -f "$fuzz_log"
  for f in "${fuzzers[@]}"; do bash scripts/fuzz.sh "$f" "$fuzz_seconds"; done
fi

# The npm packages of the openai client and viz browser tests (project-local; skipped without node/npm).
bash scripts/install_npm_tests.sh || echo "test: npm test packages not installed; the openai client and viz browser tests will be skipped"

# Sanitizer and emulation tiers (scripts/tiers.sh): asan on the unit tests, tsan on the threaded ones,
# aarch64 NEON kernels under qemu-user, the Vulkan tests under the validation layer and on SwiftShader. MINFER_TIERS=none skips them, e.g. MINFER_TIERS="asan tsan".
bash scripts/tiers.sh ${MINFER_TIERS:-asan tsan neon vulkan}

# The release tests, last: ctest's summary, then how many parity cases ran per kind against what the
# fixtures hold (scripts/parity_counts.sh; with MINFER_FIXTURES_REQUIRED=1 fewer is a failure).
export MINFER_PARITY_LOG="$(mktemp)"
rc=0
ctest --preset release -j "$jobs" || rc=$?
bash scripts/parity_counts.sh "$MINFER_PARITY_LOG" || rc=1
rm -f "$MINFER_PARITY_LOG"
exit "$rc"
