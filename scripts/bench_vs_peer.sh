#!/usr/bin/env bash
# minfer against llama.cpp (the peer in ../shared/peer) on this CPU, in interleaved rounds, same files:
# minfer at its best level and at MINFER_CPU_ISA=avx2, against the peer's best backend and, where the
# CPU has them, its one-backend `icelake` (AVX-512 VNNI, no AMX) and `haswell` (AVX2) homes.
# Prints per round pp/tg tok/s and the ratios the done-when of issue 18 asks for, with the CPU name.
# Usage: scripts/bench_vs_peer.sh [--big] [--only "M ..."] [--best-only] [--rounds N] [--threads N] [--pp N] [--tg N]
#        [--minfer BIN]
#   --big: also the 7B/8B/30B-A3B Q4_K_M files (scripts/make_bench_models.sh --big): pp512/tg32 (issue 29's
#   7B target, issue 24's 8B and 30B-A3B ones; the 7B was pp256 before 2026-12-03).
#   --only: just these models (names of models/bench/*.gguf without .gguf).
#   --best-only: only minfer's best level against the peer's best backend (no avx2 / haswell / icelake rows).
# Needs models/bench/ (scripts/make_bench_models.sh) and node; installs missing peer homes (npm, once).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=2 threads=2 pp=512 tg=128 big=0 only="" best_only=0 minfer=build/release/src/cli/minfer
while [ $# -gt 0 ]; do
  case "$1" in
    --big) big=1 ;;
    --only) only="$2"; shift ;;
    --best-only) best_only=1 ;;
    --rounds) rounds="$2"; shift ;;
    --threads) threads="$2"; shift ;;
    --pp) pp="$2"; shift ;;
    --tg) tg="$2"; shift ;;
    --minfer) minfer="$2"; shift ;;
    *) echo "bench_vs_peer: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
peer_dir="${MINFER_PEER_DIR:-../shared/peer}"
P="$peer_dir/llamacpp-peer.mjs"
[ -x "$minfer" ] || { echo "bench_vs_peer: $minfer missing (scripts/build.sh release)" >&2; exit 1; }
[ -f "$P" ] || { echo "bench_vs_peer: peer not found at $peer_dir" >&2; exit 1; }

cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
fam="$(grep -m1 '^cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')"
mod="$(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')"
flags="$(grep -m1 '^flags' /proc/cpuinfo)"

# Peer homes: label=home. The default home picks llama.cpp's best backend for this CPU.
best_home="${LLAMACPP_PEER_HOME:-$HOME/.cache/llamacpp-peer}"
[ -d "$best_home" ] || LLAMACPP_PEER_HOME="$best_home" bash "$peer_dir/install.sh"
best_variant="$(LLAMACPP_PEER_HOME="$best_home" node "$P" info "models/bench/qwen2.5-0.5b-q4_0.gguf" 2>/dev/null |
  sed -n 's/.*"cpu_variant": "\([^"]*\)".*/\1/p')"
peers=("best:$best_variant=$best_home")
want_variants=(haswell)
grep -qw avx512f <<<"$flags" && want_variants=(icelake haswell)
[ "$best_only" = 1 ] && want_variants=()
for v in "${want_variants[@]}"; do
  [ "$v" = "$best_variant" ] && continue
  home="$HOME/.cache/llamacpp-peer-$v"
  [ -d "$home" ] || LLAMACPP_PEER_VARIANT="$v" LLAMACPP_PEER_HOME="$home" bash "$peer_dir/install.sh"
  peers+=("$v=$home")
done

best_isa="$("$minfer" bench models/bench/qwen2.5-0.5b-q4_0.gguf -p 0 -n 1 -r 1 -t 1 -o json 2>/dev/null |
  sed -n 's/.*"isa": "\([^"]*\)".*/\1/p' | head -1)"
minfers=("minfer-$best_isa=")
[ "$best_isa" != "avx2" ] && [ "$best_only" = 0 ] && minfers+=("minfer-avx2=avx2")

models=(qwen2.5-0.5b-q4_0 qwen2.5-0.5b-q8_0 qwen2.5-0.5b-q4_k_m qwen3-0.6b-q8_0)
[ "$big" = 1 ] && models+=(qwen2.5-7b-q4_k_m llama-3.1-8b-q4_k_m qwen3-30b-a3b-q4_k_m)
[ -n "$only" ] && read -r -a models <<<"$only"

# avg_ts of the pp and tg rows of a llama-bench-like JSON array, as "pp tg".
ts_of() { node -e '
  const rows = JSON.parse(require("fs").readFileSync(0, "utf8"));
  const pick = (f) => { const r = rows.find(f); return r ? r.avg_ts.toFixed(2) : "nan"; };
  console.log(pick((r) => r.n_prompt > 0) + " " + pick((r) => r.n_gen > 0));'; }

echo "# $cpu (family $fam model $mod), $threads threads, $(date -u +%F)"
echo "# peers: ${peers[*]}"
printf '| round | model | engine | pp%s | tg%s (tg32 for the 7B/8B/30B) |\n|---|---|---|---|---|\n' "$pp" "$tg"
declare -A result
for ((round = 1; round <= rounds; ++round)); do
  for m in "${models[@]}"; do
    f="models/bench/$m.gguf"
    [ -f "$f" ] || { echo "bench_vs_peer: $f missing (scripts/make_bench_models.sh)" >&2; exit 1; }
    p=$pp t=$tg
    case "$m" in qwen2.5-7b-q4_k_m | llama-3.1-8b-q4_k_m | qwen3-30b-a3b-q4_k_m) t=32 ;; esac
    for e in "${minfers[@]}"; do
      name="${e%%=*}" isa="${e#*=}"
      r="$(MINFER_CPU_ISA="$isa" "$minfer" bench "$f" -p "$p" -n "$t" -r 1 -t "$threads" -o json 2>/dev/null | ts_of)"
      result["$round,$m,$name"]="$r"
      printf '| %s | %s | %s | %s | %s |\n' "$round" "$m" "$name" ${r}
    done
    for e in "${peers[@]}"; do
      name="llama.cpp-${e%%=*}" home="${e#*=}"
      r="$(LLAMACPP_PEER_HOME="$home" node "$P" bench "$f" -p "$p" -n "$t" -r 1 -t "$threads" -o json 2>/dev/null |
        ts_of)"
      result["$round,$m,$name"]="$r"
      printf '| %s | %s | %s | %s | %s |\n' "$round" "$m" "$name" ${r}
    done
  done
done

# Ratios per round: minfer best vs the peer's best, minfer avx2 vs haswell.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }
haswell_peer="llama.cpp-haswell"
[ "$best_variant" = haswell ] && haswell_peer="llama.cpp-best:haswell"
echo
printf '| round | model | %s / llama.cpp %s pp, tg | minfer avx2 / haswell pp, tg |\n|---|---|---|---|\n' \
  "minfer-$best_isa" "$best_variant"
for ((round = 1; round <= rounds; ++round)); do
  for m in "${models[@]}"; do
    read -r bp bt <<<"${result["$round,$m,minfer-$best_isa"]}"
    read -r pp_ pt <<<"${result["$round,$m,llama.cpp-best:$best_variant"]}"
    a2="${result["$round,$m,minfer-avx2"]:-${result["$round,$m,minfer-$best_isa"]}}"
    read -r ap at <<<"$a2"
    read -r hp ht <<<"${result["$round,$m,$haswell_peer"]:-nan nan}"  # none with --best-only
    printf '| %s | %s | %s, %s | %s, %s |\n' "$round" "$m" "$(ratio "$bp" "$pp_")" "$(ratio "$bt" "$pt")" \
      "$(ratio "$ap" "$hp")" "$(ratio "$at" "$ht")"
  done
done
