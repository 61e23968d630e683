#!/usr/bin/env bash
# Written in the 2026-12-06 08:53 session (issue 30). The AMX level's decode with the AVX-512 VNNI whole-block dots
# and their 4-row form (act_bsum_avx512.c; CLOVER_BSUM512=0 keeps act_bsum_avx2.c) on the device's 16-vCPU host: the
# bar's decode figure (>= 1.2x llama.cpp's tg32) had 1.20-1.41x before. Run after final30:l,b in the same call
# (final30's b gives prompt / decode / preview / commit at the amx and avx2 levels with the new dots by default).
#   run(command="(bash bench/device-runs/2026-12-29-final30/prep.sh &); ITEMS='... final30:l,b dec30:d' ...")
# STEPS: d  bench_backend --gen-only --threads 16 at the amx level, CLOVER_BSUM512 1 / 0 / 1 / 0, and at the avx2 level
#           once (decode tok/s and its split); then bench_moe_products --rows 1 --threads 16, BSUM512 1 / 0
# Predictions: RESULTS.md.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-d}
. "$PACK/lib.sh"
dr_init dec30
M=${DEC30_M:-/tmp/synth35.gguf}
say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) ($(nproc) cpus); load $(cut -d' ' -f1-3 /proc/loadavg)"
[ -s "$M" ] || { timeout 200 "$D/bin/clover" synth --preset qwen3.5-35b-a3b -t 8 -o "$M.part" > "$O/synth.log" 2>&1 &&
  mv "$M.part" "$M"; }
if has d; then
  for f in "auto 1" "auto 0" "auto 1" "auto 0" "avx2 1"; do
    set -- $f
    [ "$(el)" -lt $(( ${DR_LIMIT:-585} - 30 )) ] || { say "no time for $f"; break; }
    L=$O/d_$1_$2_$(el).log
    CLOVER_BSUM512=$2 timeout 90 "$D/bin/bench_backend" "$M" --threads 16 --gen 24 --gen-only --simd $1 > "$L" 2>&1
    say "decode --simd $1 BSUM512=$2 rc=$? at +$(el)s: $(grep -m1 -E '^(decode|generation)' "$L" | sed -E 's/ +/ /g' | cut -c1-160)"
  done
  for v in 1 0; do
    CLOVER_BSUM512=$v timeout 60 "$D/bin/bench_moe_products" --rows 1 --threads 16 --reps 30 > "$O/moe1_$v.log" 2>&1
    say "bench_moe_products --rows 1 --threads 16 BSUM512=$v rc=$?: $(grep -E '^(median|level)' "$O/moe1_$v.log" | tr '\n' ' ' | cut -c1-160)"
  done
fi
dr_end
