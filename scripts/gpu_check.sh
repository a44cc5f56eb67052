#!/usr/bin/env bash
# GPU check (issue 23, "Performance needs a real GPU"): on a machine with a Vulkan GPU, in one command of
# at most 10 minutes, prints what is needed to fill in docs/PERFORMANCE.md's GPU section:
#   1. the machine: vulkaninfo --summary and nvidia-smi (when present), `minfer devices`;
#   2. a release build of minfer, the logits parity test and the Vulkan op tests (skipped with --no-build
#      when already built);
#   3. the Vulkan op tests (test_backend_vulkan: every shader against the CPU) on the device, then parity
#      at full offload: the logits parity test (llama.cpp's references) on two fixture models with
#      MINFER_BACKENDS=vulkan MINFER_GPU_LAYERS=all;
#   4. the device's copy bandwidth (`minfer devices --bandwidth`);
#   5. `minfer bench` pp512 / tg128 at --gpu-layers all on a Qwen2.5-0.5B- and a Qwen2.5-7B-shaped Q4_K_M
#      (random weights, real vocabulary; made once with `minfer make-model`, kept in the models folder);
#   6. a Markdown block to paste: the figures, 7B decode's weight bytes per second (file bytes x tok/s)
#      as a fraction of the device->device copy bandwidth (target >= 50%) and 7B pp512 (target >= 5,000
#      tok/s on an H100-class GPU).
# Every step runs under `timeout`; a failed step is reported and the rest still run; the exit status is
# non-zero when any step failed. Past MINFER_GPU_CHECK_BUDGET_S (500 s) no further model is made or
# benchmarked; made models are kept in --models, so a second run (with --no-build) finishes the rest.
#
# Usage: scripts/gpu_check.sh [--gpu N] [--no-build] [--bundle FILE] [--models DIR] [--logs DIR] [--small] [--out FILE]
#   --gpu N      the Vulkan device (`minfer devices`); default: the registry's choice (a GPU before lavapipe)
#   --small      correctness run on a CPU-type device (lavapipe): a generated tiny-qwen2 (F16) and the
#                fixtures' qwen2-mini Q4_K_M instead of 0.5B / 7B, pp64 / tg16, one repetition, 16 MiB copies. Its figures are NOT performance (they measure
#                the host CPU running Vulkan); docs/PERFORMANCE.md says so.
#   --out FILE   also write the Markdown block there (default: LOGS/gpu_check.md)
#   --logs DIR   where the logs, the bench CSVs and the block go (default: build)
#   --bundle FILE  run what scripts/gpu_bundle.sh packed (binaries, their libraries, Debian's Vulkan
#                loader, the fixtures) instead of a build: for a machine with no compiler, glslc or package
#                mirror, such as the session's lent device machine. Implies --no-build. Where the machine
#                has no Vulkan loader, the bundle's Debian packages are unpacked into / (as root), and
#                NVIDIA's ICD under /usr/local/nvidia is named when the loader's own folders lack one.
#                The device tool's call: docs/BACKENDS.md, "Running the GPU check on a lent machine".
# Needs: a Vulkan loader and device, glslc + libvulkan-dev to build (scripts/setup.sh), ../shared/fixtures.
set -uo pipefail
cd "$(dirname "$0")/.."

gpu=""
build=1
small=0
models="models/bench"
out=""
logs="build"
bundle=""
while [ $# -gt 0 ]; do
  case "$1" in
    --gpu) gpu="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --small) small=1; shift ;;
    --models) models="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --logs) logs="$2"; shift 2 ;;
    --bundle) bundle="$2"; build=0; shift 2 ;;
    *) echo "gpu_check: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done

fixtures="${MINFER_FIXTURES_DIR:-../shared/fixtures}"
MINFER=build/release/src/cli/minfer
PARITY=build/release/tests/parity/test_parity
OPTESTS=build/release/tests/backend_vulkan/test_backend_vulkan
mkdir -p "$logs"
out="${out:-$logs/gpu_check.md}"

if [ -n "$bundle" ]; then
  # The bundle is unpacked beside the machine's temporary files; python3's tarfile stands in for a
  # missing xz.
  b="${TMPDIR:-/tmp}/minfer-gpu-bundle"
  rm -rf "$b" && mkdir -p "$b"
  tar -xJf "$bundle" -C "$b" 2>/dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$bundle" "$b" ||
    { echo "gpu_check: cannot unpack $bundle" >&2; exit 1; }
  MINFER="$b/bin/minfer"
  PARITY="$b/bin/test_parity"
  OPTESTS="$b/bin/test_backend_vulkan"
  fixtures="$b/fixtures"
  export LD_LIBRARY_PATH="$b/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # This machine's libstdc++ where it is new enough (a GPU driver loaded into minfer may need it),
  # else the bundle's.
  need=$(grep -ao 'GLIBCXX_3\.4\.[0-9]*' "$MINFER" | sort -uV | tail -1)
  sys_cxx=$(ldconfig -p | awk '/libstdc\+\+\.so\.6 .*x86-64/{print $NF; exit}')
  if [ -z "$sys_cxx" ] || ! grep -qa "$need" "$sys_cxx"; then
    echo "gpu_check: this machine's libstdc++ (${sys_cxx:-none}) lacks $need: using the bundle's"
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$b/lib-cxx"
  fi
  # NVIDIA's Vulkan driver (libGLX_nvidia) needs glvnd's libGLdispatch: the device tool's recipe.
  if ! ldconfig -p | grep -q 'libGLdispatch\.so\.0'; then
    if [ "$(id -u)" = 0 ]; then
      echo "gpu_check: no glvnd / Vulkan loader here: unpacking the bundle's Debian packages into /"
      for f in "$b"/debs/*.deb; do dpkg -x "$f" /; done
      ldconfig
    else
      echo "gpu_check: no libGLdispatch.so.0 here and not root: NVIDIA's driver may not load" >&2
    fi
  fi
  nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  if [ -z "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ] && [ -f "$nvidia_icd" ] &&
    ! ls /etc/vulkan/icd.d/nvidia* /usr/share/vulkan/icd.d/nvidia* >/dev/null 2>&1; then
    echo "gpu_check: naming NVIDIA's ICD, $nvidia_icd"
    export VK_DRIVER_FILES="$nvidia_icd" VK_ICD_FILENAMES="$nvidia_icd"
  fi
  echo "bundle: $(cat "$b/VERSION")"
  # What the binaries load from outside the bundle: glibc and libstdc++ only, or a named missing one.
  ldd "$MINFER" "$PARITY" | awk -v b="$b" '/=>/ && index($3, b) != 1 {print "  from this machine:", $1, $3}' | sort -u
fi
failed=()
t_start=$(date +%s)

# Past this many seconds no new model is made or benchmarked, so the whole check stays inside 10 minutes.
budget_s=${MINFER_GPU_CHECK_BUDGET_S:-500}
over_budget() { [ $(( $(date +%s) - t_start )) -gt "$budget_s" ]; }
section() { printf '\n=== %s (t=%ds) ===\n' "$1" "$(( $(date +%s) - t_start ))"; }
# run LIMIT_S NAME CMD...: runs CMD under a time limit; records NAME as failed when it fails.
run() {
  local limit="$1" name="$2"
  shift 2
  timeout --kill-after=10 "$limit" "$@"
  local rc=$?
  if [ $rc -ne 0 ]; then
    [ $rc -eq 124 ] && echo "gpu_check: $name: over its ${limit}s limit" >&2
    failed+=("$name (exit $rc)")
  fi
  return $rc
}

if [ "$small" = 1 ]; then
  pp=64; tg=16; reps=1; bw_mib=16
  bench_models=("tiny:tiny-qwen2:f16" "mini:fixture:qwen2-mini-q4_k_m")
  parity_filter='*qwen2_mini_q4_k_m_default*'
else
  pp=512; tg=128; reps=3; bw_mib=1024
  bench_models=("0.5b:qwen2.5-0.5b:q4_K_M" "7b:qwen2.5-7b:q4_K_M")
  parity_filter='*qwen2_mini_q4_k_m_*:*qwen3_mini_q4_k_m_*'
  [ -n "$bundle" ] && parity_filter='*qwen2_mini_q4_k_m_*'  # the one fixture model a bundle holds
fi
gpu_flag=()
[ -n "$gpu" ] && gpu_flag=(--gpu "$gpu")

section "machine"
date -u
uname -srm
grep -m1 'model name' /proc/cpuinfo || true
[ -n "$bundle" ] || git log -1 --format='minfer %h %s' 2>/dev/null || true
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.memory --format=csv || true
fi
if command -v vulkaninfo >/dev/null; then
  timeout 30 vulkaninfo --summary 2>/dev/null | sed -n '/^Devices:/,$p' || true
else
  echo "(no vulkaninfo: apt-get install vulkan-tools)"
fi

mkdir -p build
if [ "$build" = 1 ]; then
  section "build (release: minfer, test_parity)"
  run 420 build bash -c 'source scripts/use_ccache.sh 2>/dev/null; cmake --preset release >/dev/null &&
    cmake --build --preset release --target minfer test_parity test_backend_vulkan' >"$logs/gpu_check_build.log" 2>&1
  tail -3 "$logs/gpu_check_build.log"
fi
if [ ! -x "$MINFER" ]; then
  echo "gpu_check: $MINFER is missing (build failed, or --no-build without a build)" >&2
  exit 1
fi

section "minfer devices"
run 60 devices "$MINFER" devices

section "copy bandwidth (${bw_mib} MiB per copy)"
run 120 bandwidth "$MINFER" devices --bandwidth --bandwidth-mib "$bw_mib" "${gpu_flag[@]}" >"$logs/gpu_check_bandwidth.log" 2>&1
bw_line=$(grep -m1 '^bandwidth:' "$logs/gpu_check_bandwidth.log")
echo "${bw_line:-bandwidth: not measured ($(tail -1 "$logs/gpu_check_bandwidth.log"))}"
d2d_gbs=$(sed -n 's/.*device->device \([0-9.]*\) GB\/s.*/\1/p' <<<"$bw_line")

section "Vulkan op tests on the device (test_backend_vulkan)"
optests="not run"
if [ -x "$OPTESTS" ]; then
  opfilter='*'
  if [ -n "$bundle" ]; then
    # Five cases run the build tree's minfer or read its docs: a bundle has neither at those paths.
    opfilter='-VulkanDevice.NoLoaderOrNoDeviceFallsBackToTheCpu:VulkanDevice.ValidationAskedForWithoutTheLayerIsRefusedByName'
    opfilter+=':VulkanDevice.DevicesCommandListsBackends:VulkanDevice.DevicesBandwidthMeasuresEachUsableDevice'
    opfilter+=':VulkanDevice.OpCoverageTableMatchesSupportsOp'
  fi
  if run 150 optests env MINFER_VULKAN_REQUIRED=1 ${gpu:+MINFER_VULKAN_DEVICE=$gpu} "$OPTESTS" \
    --gtest_filter="$opfilter" --gtest_brief=1 >"$logs/gpu_check_optests.log" 2>&1; then
    optests="pass"
  else
    optests="FAIL"
  fi
  grep -E 'FAILED|PASSED|Failure' "$logs/gpu_check_optests.log" | head -30
  echo "op tests: $optests ($(grep -m1 -o '[0-9]* tests\? from [0-9]* test suites\? ran' "$logs/gpu_check_optests.log"); log: $logs/gpu_check_optests.log)"
else
  echo "gpu_check: $OPTESTS is missing" >&2
  failed+=("op tests (no test binary)")
fi

section "parity at full offload (MINFER_BACKENDS=vulkan MINFER_GPU_LAYERS=all, filter $parity_filter)"
parity="not run"
if [ ! -x "$PARITY" ]; then
  echo "gpu_check: $PARITY is missing" >&2
  failed+=("parity (no test binary)")
elif [ ! -d "$fixtures/models/refs" ]; then
  echo "gpu_check: no fixtures at $fixtures (set MINFER_FIXTURES_DIR)" >&2
  failed+=("parity (no fixtures)")
else
  if run 180 parity env MINFER_FIXTURES_DIR="$fixtures" MINFER_BACKENDS=vulkan MINFER_GPU_LAYERS=all \
    MINFER_PARITY_REPORT=1 "$PARITY" --gtest_filter="$parity_filter" --gtest_brief=1 >"$logs/gpu_check_parity.log" 2>&1; then
    parity="pass"
  else
    parity="FAIL"
  fi
  grep -E '^parity |placement|FAILED|PASSED|Failure' "$logs/gpu_check_parity.log" | head -40
  echo "parity: $parity ($(grep -c '^parity ' "$logs/gpu_check_parity.log") prompt(s); log: $logs/gpu_check_parity.log)"
fi

# model_file PRESET TYPE: where the bench model lives ("fixture" TYPE: the fixture model of that name).
model_file() {
  if [ "$1" = fixture ]; then echo "$fixtures/models/$2.gguf"; else echo "$models/$1-$(tr 'A-Z' 'a-z' <<<"$2").gguf"; fi
}

section "bench models ($models)"
mkdir -p "$models"
for spec in "${bench_models[@]}"; do
  IFS=: read -r tag preset type <<<"$spec"
  vocab="$fixtures/tokenizer/qwen2-vocab.gguf"
  file=$(model_file "$preset" "$type")
  if [ ! -f "$file" ] && [ "$preset" != fixture ] && over_budget; then
    echo "gpu_check: over the ${budget_s}s budget: $file not made (run again: made models are kept)" >&2
    failed+=("make-model $preset (budget)")
  elif [ ! -f "$file" ] && [ "$preset" != fixture ]; then
    vocab_flag=()
    [ -f "$vocab" ] && [ "$preset" != tiny-qwen2 ] && vocab_flag=(--vocab "$vocab")
    run 240 "make-model $preset" "$MINFER" make-model "${file%.gguf}.part.gguf" --preset "$preset" --type "$type" \
      --seed 1 "${vocab_flag[@]}" && mv "${file%.gguf}.part.gguf" "$file"
  fi
  if [ -f "$file" ]; then echo "$tag: $file ($(du -h "$file" | cut -f1))"; else echo "$tag: $file missing"; fi
done

section "bench pp$pp / tg$tg at --gpu-layers all"
declare -A pp_ts tg_ts size_bytes
for spec in "${bench_models[@]}"; do
  IFS=: read -r tag preset type <<<"$spec"
  file=$(model_file "$preset" "$type")
  [ -f "$file" ] || continue
  if over_budget; then
    echo "gpu_check: over the ${budget_s}s budget: bench $tag skipped" >&2
    failed+=("bench $tag (budget)")
    continue
  fi
  run 240 "bench $tag" "$MINFER" bench "$file" -p "$pp" -n "$tg" -r "$reps" -o csv --backend vulkan \
    "${gpu_flag[@]}" --gpu-layers all >"$logs/gpu_check_bench_$tag.csv" 2>"$logs/gpu_check_bench_$tag.err"
  csv=$(cat "$logs/gpu_check_bench_$tag.csv")
  echo "$csv"
  grep -v placement "$logs/gpu_check_bench_$tag.err" | tail -3
  grep -m1 'placement' "$logs/gpu_check_bench_$tag.err" || true
  # model_type,model_size,model_n_params,backend,isa,n_threads,type_k,n_prompt,n_gen,n_depth,avg_ts,stddev_ts;
  # the backend field holds a comma when a device runs ("Vulkan,CPU"), so fields are counted from the end.
  pp_ts[$tag]=$(awk -F, -v p="$pp" 'NR>1 && $(NF-4)==p && $(NF-3)==0 {print $(NF-1)}' <<<"$csv")
  tg_ts[$tag]=$(awk -F, -v n="$tg" 'NR>1 && $(NF-4)==0 && $(NF-3)==n {print $(NF-1)}' <<<"$csv")
  size_bytes[$tag]=$(awk -F, 'NR==2 {print $2}' <<<"$csv")
done

section "for docs/PERFORMANCE.md"
device_name=$(sed -n 's/^bandwidth: Vulkan [0-9]* (\(.*\)): host.*/\1/p' <<<"$bw_line")
{
  echo "GPU check ($(date -u +%Y-%m-%d), \`scripts/gpu_check.sh$([ "$small" = 1 ] && echo ' --small')\`, minfer $(git log -1 --format=%h 2>/dev/null)):"
  echo "device: ${device_name:-unknown}; host CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  [ "$small" = 1 ] && echo "**Correctness run on a CPU-type Vulkan device: these figures are not GPU performance.**"
  echo
  echo "| check | result |"
  echo "| --- | --- |"
  echo "| Vulkan op tests (test_backend_vulkan) on the device | $optests |"
  echo "| parity at full offload ($parity_filter) | $parity |"
  echo "| copy bandwidth | ${bw_line#bandwidth: } |"
  for spec in "${bench_models[@]}"; do
    IFS=: read -r tag preset type <<<"$spec"
    [ -n "${pp_ts[$tag]:-}" ] || [ -n "${tg_ts[$tag]:-}" ] || { echo "| $preset $type | not measured |"; continue; }
    line="| $preset $type ($(awk -v b="${size_bytes[$tag]:-0}" 'BEGIN{printf "%.1f MiB", b/1048576}')), all blocks | pp$pp $(printf '%.1f' "${pp_ts[$tag]:-0}") tok/s, tg$tg $(printf '%.1f' "${tg_ts[$tag]:-0}") tok/s"
    if [ -n "${tg_ts[$tag]:-}" ] && [ -n "$d2d_gbs" ]; then
      line+=$(awk -v b="${size_bytes[$tag]}" -v t="${tg_ts[$tag]}" -v bw="$d2d_gbs" \
        'BEGIN{r=b*t/1e9; printf "; decode reads weights at %.2f GB/s = %.1f%% of device->device copy", r, 100*r/bw}')
    fi
    echo "$line |"
  done
  if [ "$small" = 0 ]; then
    echo
    echo "Targets: 7B decode >= 50% of the device->device copy bandwidth; 7B pp512 >= 5,000 tok/s on an H100-class GPU."
  fi
  [ ${#failed[@]} -gt 0 ] && echo && echo "Failed steps: ${failed[*]}"
} | tee "$out"
echo
echo "gpu_check: $(( $(date +%s) - t_start ))s; written to $out"
[ ${#failed[@]} -eq 0 ]
