#!/usr/bin/env bash
# The tiers that catch what the release tests cannot, each building only the test binaries it runs:
#   asan  AddressSanitizer + UBSan (`asan` preset) on every `unit` test
#   tsan  ThreadSanitizer (`tsan` preset) on the threaded code: the entries of TSAN_TESTS below
#   neon  the aarch64 cross build (`neon` preset, cmake/toolchains/aarch64-linux-gnu.cmake): the quant
#         kernel and engine tests, and the logits parity of NEON-computed weight types, under qemu-user
#   vulkan the Vulkan tests (release build) twice more: on lavapipe under the Khronos validation layer with
#         synchronization validation (MINFER_VULKAN_VALIDATE=1: any message fails the test), and on a second
#         driver, SwiftShader (Chromium's copy, from Debian's chromium package): subgroups of 4 instead of
#         lavapipe's 8, 1 GiB allocations, no 8/16-bit storage. Skipped with a message where the layer or
#         SwiftShader is missing, failed then under MINFER_VULKAN_REQUIRED=1 (CI).
# Usage: scripts/tiers.sh [asan] [tsan] [neon] [vulkan] | none     (scripts/test.sh runs all four)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="$(nproc)"
source scripts/use_ccache.sh

# tsan: "<test target>|<gtest filter>" per line, one for each threaded component: the pool and matmul, the
# engine (batcher, speculation), the programs on it (sessions, perplexity), the dump/trace observers (pool lanes) and the viz server.
TSAN_TESTS=(
  "test_quant|ThreadPool*:Matmul*:*MatmulTest*"
  "test_engine|*"
  "test_apps|*"
  "test_inspect|*"
  "test_viz|*"
)

# neon: logits parity cases run under qemu (ctest -R), one per weight type with a NEON dot, exact KV
# setting (the rest of the parity tier runs natively; each case under emulation takes seconds).
NEON_PARITY='LogitsParity.*/qwen[23]_mini_(q8_0|q4_0|q4_1|q5_0|q5_1|q4_k_m|q5_k_m|q6_k|f32)_exact( |$)'

# vulkan: the ICD manifest of Chromium's SwiftShader (VK_ICD_FILENAMES makes it the only device).
SWIFTSHADER_ICD=/usr/lib/chromium/vk_swiftshader_icd.json
VULKAN_TESTS=(test_backend_vulkan test_backend_vulkan_offload test_backend_vulkan_faults minfer)

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
      build neon test_quant test_engine test_apps test_parity
      echo "tier neon: aarch64 kernel and engine tests under qemu-user"
      run_ctest --preset neon -L unit -j "$jobs" --timeout 300 --no-tests=error \
        || { echo "tiers: neon tier failed" >&2; exit 1; }
      echo "tier neon: logits parity under qemu-user (NEON-computed types)"
      run_ctest --preset neon -L parity -R "$NEON_PARITY" -j "$jobs" --timeout 300 --no-tests=error \
        || { echo "tiers: neon parity failed" >&2; exit 1; }
      ;;
    vulkan)
      missing=""
      [ -f /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json ] || missing="the validation layer (vulkan-validationlayers)"
      [ -f "$SWIFTSHADER_ICD" ] || missing="${missing:+$missing and }SwiftShader ($SWIFTSHADER_ICD, from chromium)"
      if [ -n "$missing" ]; then
        echo "tier vulkan: no $missing"
        if [ "${MINFER_VULKAN_REQUIRED:-0}" = 1 ]; then echo "tiers: vulkan tier required" >&2; exit 1; fi
        continue
      fi
      build release "${VULKAN_TESTS[@]}"
      echo "tier vulkan: the Vulkan tests on lavapipe under the validation layer (synchronization validation on)"
      MINFER_VULKAN_VALIDATE=1 MINFER_VULKAN_REQUIRED=1 \
        run_ctest --preset release -R Vulkan -j "$jobs" --no-tests=error || { echo "tiers: vulkan validation failed" >&2; exit 1; }
      # The device the tests pick must be SwiftShader, or this would test lavapipe again.
      if ! VK_ICD_FILENAMES="$SWIFTSHADER_ICD" build/release/src/cli/minfer devices 2>&1 | grep -q SwiftShader; then
        VK_ICD_FILENAMES="$SWIFTSHADER_ICD" build/release/src/cli/minfer devices >&2 || true
        echo "tiers: SwiftShader is not a usable Vulkan device here" >&2
        exit 1
      fi
      echo "tier vulkan: the Vulkan tests on SwiftShader"
      VK_ICD_FILENAMES="$SWIFTSHADER_ICD" MINFER_VULKAN_REQUIRED=1 \
        run_ctest --preset release -R Vulkan -j "$jobs" --no-tests=error || { echo "tiers: vulkan on SwiftShader failed" >&2; exit 1; }
      ;;
    *) echo "tiers: unknown tier '$tier' (asan, tsan, neon, vulkan, none)" >&2; exit 1 ;;
  esac
  [ "$tier" = none ] || echo "tier $tier: $((SECONDS - start)) s"
done
