#!/usr/bin/env bash
# The tiers that catch what the release tests cannot, each building only the test binaries it runs:
#   asan  AddressSanitizer + UBSan (`asan` preset) on every `unit` test
#   tsan  ThreadSanitizer (`tsan` preset) on the threaded code: the entries of TSAN_TESTS below
#   neon  the aarch64 cross build (`neon` preset, cmake/toolchains/aarch64-linux-gnu.cmake): the quant
#         kernel and engine tests, and the logits parity of NEON-computed weight types, under qemu-user
# Usage: scripts/tiers.sh [asan] [tsan] [neon] | none     (scripts/test.sh runs all three)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="$(nproc)"
source scripts/use_ccache.sh

# tsan: "<test target>|<gtest filter>" per line, one for each threaded component: the pool and matmul, the
# engine (batcher, speculation, sessions), the dump/trace observers (pool lanes) and the viz server.
TSAN_TESTS=(
  "test_quant|ThreadPool*:Matmul*:*MatmulTest*"
  "test_engine|*"
  "test_inspect|*"
  "test_viz|*"
)

# neon: logits parity cases run under qemu (ctest -R), one per weight type with a NEON dot, exact KV
# setting (the rest of the parity tier runs natively; each case under emulation takes seconds).
NEON_PARITY='LogitsParity.*/qwen[23]_mini_(q8_0|q4_0|q4_1|q5_0|q5_1|q4_k_m|q5_k_m|q6_k|f32)_exact( |$)'

build() {  # build PRESET TARGETS...: configure once, build only TARGETS, show the log on failure
  local preset="$1" log
  shift
  log="$(mktemp)"
  if ! { cmake --preset "$preset" >/dev/null && cmake --build --preset "$preset" --target "$@"; } >"$log" 2>&1; then
    tail -60 "$log"
    echo "tiers: $preset build failed" >&2
    exit 1
  fi
  rm -f "$log"
}

run_ctest() {  # ctest ARGS...: the summary on success, the failures on failure
  local log
  log="$(mktemp)"
  if ctest "$@" >"$log" 2>&1; then
    grep -E "tests passed|Total Test time" "$log"
    rm -f "$log"
  else
    grep -vE "Test +#[0-9]+: .* Passed" "$log" | tail -100
    rm -f "$log"
    return 1
  fi
}

for tier in "$@"; do
  start=$SECONDS
  case "$tier" in
    none) ;;
    asan)
      build asan minfer_unit_tests
      echo "tier asan: unit tests under AddressSanitizer + UBSan"
      ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="print_stacktrace=1" \
        run_ctest --preset asan -L unit -j "$jobs" --no-tests=error || { echo "tiers: asan tier failed" >&2; exit 1; }
      ;;
    tsan)
      targets=()
      for entry in "${TSAN_TESTS[@]}"; do targets+=("${entry%%|*}"); done
      build tsan "${targets[@]}"
      for entry in "${TSAN_TESTS[@]}"; do
        bin="$(find build/tsan/tests -type f -name "${entry%%|*}" -perm -u+x | head -1)"
        echo "tier tsan: ${entry%%|*} --gtest_filter=${entry#*|}"
        TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" "$bin" --gtest_filter="${entry#*|}" --gtest_brief=1 \
          || { echo "tiers: tsan tier failed in ${entry%%|*}" >&2; exit 1; }
      done
      ;;
    neon)
      build neon test_quant test_engine test_parity
      echo "tier neon: aarch64 kernel and engine tests under qemu-user"
      run_ctest --preset neon -L unit -j "$jobs" --timeout 300 --no-tests=error \
        || { echo "tiers: neon tier failed" >&2; exit 1; }
      echo "tier neon: logits parity under qemu-user (NEON-computed types)"
      run_ctest --preset neon -L parity -R "$NEON_PARITY" -j "$jobs" --timeout 300 --no-tests=error \
        || { echo "tiers: neon parity failed" >&2; exit 1; }
      ;;
    *) echo "tiers: unknown tier '$tier' (asan, tsan, neon, none)" >&2; exit 1 ;;
  esac
  [ "$tier" = none ] || echo "tier $tier: $((SECONDS - start)) s"
done
