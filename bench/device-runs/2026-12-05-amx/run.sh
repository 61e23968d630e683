#!/usr/bin/env bash
# Issue 30, round 2: the AMX int8 level for Q8_0, Q4_K and Q5_K in the whole-block order (branch amx:
# src/quant/gemm_amx.c, act_bsum_avx2.c) on the H200 machine's Xeon host. CPU binaries only.
#   run(command="bash .gpu-amx/run.sh", carry=[".gpu-amx"], timeout_s=120)
# .gpu-amx/: bin/ (tests + bench_gemm_levels of the commit in .gpu-amx/COMMIT), lib/ (jansson, pcre2,
# utf8proc), this script. Wall: ~30-50 s (tests ~15 s, 8 bench runs ~2-4 s each).
# Predictions (reasoned from instruction counts, not measured; the dev VM has no AMX):
#  - flags include amx_tile amx_int8 avx512_vnni; test_quant_amx prints "level: amx" and passes with
#    CLOVER_AMX_FLIGHT 4 (default) and 2; the other tests pass at the AMX level (they ran at a faked
#    AMX level with the emulated kernel on the dev VM and passed; test_matmul_amx_emu is that run).
#  - bench_gemm_levels q8_0 2048x2048, 1 thread (ms). Before (2026-12-04, VNNI / old lane-exact AMX):
#    8 rows 0.92 / 1.12; 32 rows 2.96 / 5.77; 64 rows 5.88 / 10.96; 512 rows 50.4 / 89.0.
#    Predicted AMX (whole-block): 8 rows 0.25-0.6 (1.5-3.5x VNNI); 32 rows 0.3-1.0; 64 rows 0.5-2.0;
#    512 rows 4-15 (3-12x VNNI; one tile step of 16x16 pairs x 1 block ~30-40 cycles: 16 cvt + 16 mul
#    + 16 fma on 2 ports, a 1 KiB tile store, ~57 loads). 1 row (the level's one-row dot, a serial
#    FMA chain): 1.0-2.2x the VNNI level's time (it ran 2.0x slower in cache on the Zen 4 dev VM).
#  - 16 threads: AMX/VNNI speed-up at 64-512 rows 2-6x (smaller than 1 thread: the 8-bit staging
#    runs on the calling thread, ~0.3-0.5 ms at 512 rows); flight 4 vs 2 within +-15%.
#  - q4_K / q5_K (before, VNNI 1 thread: q4_K 8r 1.11, 32r 3.44, 64r 6.44, 512r 53.0; q5_K 1.25 3.65
#    6.50 54.2): the same tiles per sub-block plus the weight unpack and the mins step (~15% more
#    per MAC than Q8_0): 1 thread 8r 1.3-3x, 32-512r 2.5-10x; 1 row 0.4-1.0x (the one-row dot, 9
#    chained FMAs a super-block, ran 1.65x the AVX2 dot's time in cache on the dev VM).
set -uo pipefail
R=${OUT:-/tmp/out}; mkdir -p "$R"; S=$R/summary.txt; P=.gpu-amx
export CLOVER_SOURCE_DIR=$PWD  # test_cpu_moe reads tests/data
export LD_LIBRARY_PATH=$P/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
say() { echo "$*" | tee -a "$S"; }
say "start $(date -u +%T) commit $(cat $P/COMMIT) cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) ($(nproc) cpus)"
say "flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512f|avx512bw|avx512vl|avx512_vnni|avx_vnni|amx_tile|amx_int8|amx_bf16)$' | tr '\n' ' ')"
t() { # name [env...]: one test binary, its level line and result
  local n=$1; shift
  env "$@" timeout 120 $P/bin/$n > "$R/$n${1:+.${1%%=*}}.log" 2>&1; local rc=$?
  local log="$R/$n${1:+.${1%%=*}}.log"
  say "$n ${*:-} rc=$rc $(grep -m1 -E '^level|^SKIP' "$log") | $(tail -1 "$log")"
  [ $rc = 0 ] || grep -m6 -E "FAIL|differ|CHECK" "$log" | tee -a "$S"
}
t test_quant_amx
t test_quant_amx CLOVER_AMX_FLIGHT=2
t test_gemm_amx_emu
t test_matmul_amx_emu
for n in test_quant_avx512 test_gemm test_matmul test_matmul_group test_matmul_batch test_cpu_moe \
  test_backend_cpu test_golden_quant test_golden_clover; do t $n; done
B() { # label env...: q8_0 at 1/8/32/64/512 rows, 1 and 16 threads
  local label=$1; shift
  for th in 1 16; do
    env "$@" timeout 60 $P/bin/bench_gemm_levels --types q8_0,q4_k,q5_k --rows 1,8,32,64,512 --threads $th --reps 5 \
      > "$R/bench-$label-$th.log" 2>&1 || say "bench $label threads $th rc=$?"
  done
}
B amx
B amx2 CLOVER_AMX_FLIGHT=2
B vnni CLOVER_NO_AMX=1
B avx2 CLOVER_NO_AVX512=1
say "levels seen: $(for f in "$R"/bench-*-1.log; do echo -n "$(basename $f .log)=$(head -1 $f | cut -d, -f1 | cut -d' ' -f2) "; done)"
pred() { case "$1 $2 $3" in
  "q8_0 1 1") echo 0.45-1.0x;; "q8_0 1 8") echo 1.5-3.5x;; "q8_0 1 32") echo 3-10x;; "q8_0 1 64"|"q8_0 1 512") echo 3-12x;;
  *" 1 1") echo 0.4-1.0x;; *" 1 8") echo 1.3-3x;; *" 1 "*) echo 2.5-10x;;
  *" 16 1") echo 0.8-1.05x;; *" 16 8") echo 1.2-3x;; *) echo 2-6x;; esac; }
for ty in q8_0 q4_K q5_K; do
  say "$ty 2048x2048 ms (threads rows: amx amx-flight2 vnni avx2 | vnni/amx speed-up, predicted)"
  for th in 1 16; do
    for rows in 1 8 32 64 512; do
      v() { awk -v t=$ty -v r=$rows '$1==t && $2==r {print $3}' "$R/bench-$1-$th.log"; }
      a=$(v amx); a2=$(v amx2); vn=$(v vnni); x=$(v avx2)
      say "  $th $rows: $a $a2 $vn $x | $(awk -v a="$a" -v b="$vn" 'BEGIN{if (a>0) printf "%.2fx", b/a}') (predicted $(pred $ty $th $rows))"
    done
  done
done
say "before (1 thread, 2026-12-04): q8_0 vnni 8r 0.92, 32r 2.96, 64r 5.88, 512r 50.4 (old lane-exact amx 1.12 5.77 10.96 89.0); q4_K vnni 1.11 3.44 6.44 53.0; q5_K vnni 1.25 3.65 6.50 54.2"
say "end $(date -u +%T)"
