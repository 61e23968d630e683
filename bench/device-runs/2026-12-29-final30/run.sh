#!/usr/bin/env bash
# Written in the 2026-12-05 23:37 session (issue 30): the bar's three figures in ONE call on the device's 16-vCPU
# Xeon host (AMX, AVX-512 VNNI), the peer and clover never timed at once: llama.cpp's CPU llama-bench
# (-p 512 -n 32 -t 16, AMX build; AMX off if it dies with SIGILL) on the --no-diffusion 35B-A3B file, then clover's
# bench_backend at the amx (auto) and avx2 levels alternating twice on the diffusion file (the same trunk weights):
# prompt 512, decode (one row + head), the 32-row preview p=0.9, the block commit.
#   cmake --build build -j2 && EXTRA_BINS="bench_backend test_quant_amx test_matmul_amx_emu test_matmul \
#     test_matmul_batch test_gemm" scripts/device-packs.sh build seq &&
#     scripts/llama-src.sh .gpu-seq/llama-src.txz
#   run(command="(bash bench/device-runs/2026-12-29-final30/prep.sh &); ITEMS='final30:l,t,b' bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=600)
# STEPS:
#  l  llama.cpp's CPU build from $PACK/llama-src.txz (prep.sh, in the background from the top of the call), then
#     llama-bench alone
#  t  test_quant_amx, test_matmul_amx_emu, test_matmul, test_matmul_batch, test_gemm on the host (real AMX tiles)
#  b  bench_backend --threads 16, auto / avx2 / auto / avx2
#  m  (2026-12-06) the preview's MoE products at the amx level: bench_moe_products --threads 16 --ab (the shared
#     staging, the K-quant prefetch and the 4-tile tasks of 865b6f9 off at once), then bench_backend amx with those
#     switches on (the default) / off, alternating twice (preview p=0.9)
#  g  bench_gemm_levels at 16 threads (amx): the preview's product shapes at 32 rows (and 8 for the experts), to
#     see whether a product at 16 threads is bound by memory, the tile work or the pool (~30 s)
#  q  (2026-12-06 05:51 session) the AMX Q4_K products of 954d266 (kq_unpack: 16 weight rows a super-block at once,
#     chunks of 2 super-blocks, the prefetch a share a step): bench_moe_products --ab against the old kernel
#     (CLOVER_AMX_KUNPACK=0,CLOVER_AMX_KCHUNK=8) at 16 and 1 threads and KCHUNK=4 at 16; bench_gemm_levels q4_K
#     512 x 2048 / 2048 x 512 at 32 rows --ab KUNPACK=0; bench_backend amx preview new / old alternating twice (~90 s)
# Predictions: in bench/device-runs/2026-12-29-final30/RESULTS.md, written before the call.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-l t b}
. "$PACK/lib.sh"
dr_init final30
unset CLOVER_AMX_Q4K_REPACK CLOVER_AMX_Q4K_PIPE CLOVER_AMX_Q4K_REPACK_MB CLOVER_NO_AMX CLOVER_NO_AVX512
say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) ($(nproc) cpus); load $(cut -d' ' -f1-3 /proc/loadavg)"
say "flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512f|avx512_vnni|amx_tile|amx_int8)$' | tr '\n' ' ')"
M=${FINAL30_M:-/tmp/synth35.gguf} A=${FINAL30_A:-/tmp/synth35-ar.gguf} LIM=${DR_LIMIT:-585}
# prep.sh (started at the top of the call, beside the GPU items) builds llama.cpp and writes the --no-diffusion file;
# without it, start it now and wait
has l && [ ! -e /tmp/llama-cpu/prep.log ] && { PACK=$PACK bash "$(dirname "$0")/prep.sh" & }
[ -s "$M" ] || { timeout 200 "$D/bin/clover" synth --preset qwen3.5-35b-a3b -t 8 -o "$M.part" > "$O/synth.log" 2>&1 &&
  mv "$M.part" "$M"; }
if has t; then
  for n in test_quant_amx test_matmul_amx_emu test_matmul test_matmul_batch test_gemm; do tst $n host 120; done
fi
if has l; then
  while [ ! -e /tmp/llama-cpu/done ] && [ "$(el)" -lt $(( LIM - 200 )) ]; do sleep 2; done
  say "prep at +$(el)s: $(cat /tmp/llama-cpu/prep.log 2>&1 | tail -1); $(tail -1 /tmp/llama-cpu/synth-ar.log 2>&1)"
  cp /tmp/llama-cpu/*.log "$O/" 2>/dev/null
  LB=/tmp/llama-cpu/bin/llama-bench
  if [ -x $LB ] && [ -s $A ]; then
    LD_LIBRARY_PATH=/tmp/llama-cpu/bin timeout 150 $LB -m $A -p 512 -n 32 -t 16 -r 2 > "$O/llama-bench.log" 2>&1
    rc=$?; say "llama-bench rc=$rc at +$(el)s (AMX build), load $(cut -d' ' -f1-3 /proc/loadavg)"
    if [ $rc = 132 ] || grep -q "Illegal instruction" "$O/llama-bench.log"; then
      LD_LIBRARY_PATH=/tmp/llama-cpu/bin GGML_AMX=0 timeout 150 $LB -m $A -p 512 -n 32 -t 16 -r 2 \
        > "$O/llama-bench.log" 2>&1; say "llama-bench again (SIGILL) rc=$?"
    fi
    grep -E "pp512|tg32" "$O/llama-bench.log" | tee -a "$S"
  else say "no llama-bench or no $A"; fi
fi
fig() { awk -v p="$2" 'index($0, p) == 1 && $0 ~ /median/ { for (i = 1; i <= NF; i++) if ($i == "median") { print $(i + 1); exit } }' "$1" 2>/dev/null; }
if has b; then
  for lv in auto avx2 auto avx2; do
    [ "$(el)" -lt $(( LIM - 45 )) ] || { say "no time for $lv"; continue; }
    k=0; while [ -e "$O/b_$lv$k.log" ]; do k=$((k + 1)); done; L=$O/b_$lv$k.log
    timeout 100 "$D/bin/bench_backend" "$M" --threads 16 --prompt 512 --gen 12 --block 32 --rows 512 --reps 3 \
      --mb 256 --simd $lv > "$L" 2>&1
    say "$lv rc=$? at +$(el)s: preview p=0.9 $(fig "$L" 'preview 32 rows, p') s; commit 32 $(fig "$L" 'commit 32-row') s; prompt 512 $(fig "$L" 'prompt 512') s; $(grep -m1 -E '^(decode|generation)' "$L" | sed -E 's/ +/ /g')"
  done
fi
if has m; then
  OLD="CLOVER_MOE_GATHER=1 CLOVER_AMX_KPF=0 CLOVER_AMX_TASK_TILES=1"
  timeout 60 "$D/bin/bench_moe_products" --threads 16 --reps 30 --ab "${OLD// /,}" > "$O/moe_ab.log" 2>&1
  say "bench_moe_products --threads 16 --ab (old switches) rc=$? at +$(el)s"
  grep -E "^(level|without|with|median)" "$O/moe_ab.log" | cut -c1-160 | tee -a "$S"
  for v in new old new old; do
    [ "$(el)" -lt $(( LIM - 25 )) ] || { say "no time for moe $v"; continue; }
    k=0; while [ -e "$O/m_$v$k.log" ]; do k=$((k + 1)); done; L=$O/m_$v$k.log
    if [ $v = old ]; then e=$OLD; else e=X=0; fi
    env $e timeout 60 "$D/bin/bench_backend" "$M" --threads 16 --prompt 32 --gen 1 --block 32 --rows 64 --reps 5 \
      --mb 64 --simd auto > "$L" 2>&1
    say "moe $v rc=$? at +$(el)s: preview p=0.9 $(fig "$L" 'preview 32 rows, p') s; $(grep -A2 -m1 '^preview 32 rows, p' "$L" | grep -o 'in products: [^(]*' | head -1)"
  done
fi
if has q; then
  KOLD="CLOVER_AMX_KUNPACK=0,CLOVER_AMX_KCHUNK=8"
  for a in "16 $KOLD" "16 CLOVER_AMX_KCHUNK=4" "1 $KOLD"; do
    set -- $a; [ "$(el)" -lt $(( LIM - 30 )) ] || break
    timeout 60 "$D/bin/bench_moe_products" --threads $1 --reps $([ $1 = 1 ] && echo 30 || echo 50) --ab "$2" \
      > "$O/q_moe_$1_${2%%=*}.log" 2>&1
    say "bench_moe_products --threads $1 --ab $2 rc=$? at +$(el)s"
    grep -E "^(level|without|with|median)" "$O/q_moe_$1_${2%%=*}.log" | cut -c1-160 | tee -a "$S"
  done
  for sh in "512 2048" "2048 512"; do
    set -- $sh; [ "$(el)" -lt $(( LIM - 20 )) ] || break
    timeout 40 "$D/bin/bench_gemm_levels" --threads 16 --out $1 --in $2 --rows 32 --types q4_K --reps 50 \
      --ab CLOVER_AMX_KUNPACK=0 > "$O/q_g_$1.log" 2>&1
    say "gemm 16 threads q4_K $1 x $2, 32 rows --ab KUNPACK=0: $(grep -E '^q4_K' "$O/q_g_$1.log" | sed -E 's/ +/ /g')"
  done
  for v in new old new old; do
    [ "$(el)" -lt $(( LIM - 25 )) ] || { say "no time for q $v"; continue; }
    k=0; while [ -e "$O/q_$v$k.log" ]; do k=$((k + 1)); done; L=$O/q_$v$k.log
    if [ $v = old ]; then e="${KOLD/,/ }"; else e=X=0; fi
    env $e timeout 60 "$D/bin/bench_backend" "$M" --threads 16 --prompt 32 --gen 1 --block 32 --rows 64 --reps 5 \
      --mb 64 --simd auto > "$L" 2>&1
    say "q4k $v rc=$? at +$(el)s: preview p=0.9 $(fig "$L" 'preview 32 rows, p') s; $(grep -A2 -m1 '^preview 32 rows, p' "$L" | grep -o 'in products: [^(]*' | head -1)"
  done
fi
if has g && [ -x "$D/bin/bench_gemm_levels" ]; then
  G=$D/bin/bench_gemm_levels
  for sh in "8192 2048 q8_0 32" "2048 4096 q8_0 32" "2048 2048 q8_0 32" "512 2048 q4_K 8,32" "2048 512 q4_K 8,32"; do
    set -- $sh; [ "$(el)" -lt $(( LIM - 10 )) ] || break
    timeout 30 $G --threads 16 --out $1 --in $2 --rows $4 --reps 9 --types $3 > "$O/g_$1_$2_$3.log" 2>&1
    say "gemm 16 threads $1 x $2 $3: $(grep -E "^$3 " "$O/g_$1_$2_$3.log" | sed -E 's/ +/ /g' | tr '\n' ';')"
  done
  for sh in "8192 2048" "2048 2048"; do
    set -- $sh; [ "$(el)" -lt $(( LIM - 10 )) ] || break
    timeout 30 $G --threads 1 --out $1 --in $2 --rows 32 --reps 5 --types q8_0,q4_K > "$O/g_t1_$1.log" 2>&1
    say "gemm 1 thread $1 x $2: $(grep -E '^q' "$O/g_t1_$1.log" | sed -E 's/ +/ /g' | tr '\n' ';')"
  done
  if [ "$(el)" -lt $(( LIM - 15 )) ]; then
    timeout 40 $G --threads 16 --out 8192 --in 2048 --rows 32 --reps 9 --types q8_0 --ab CLOVER_AMX_PF=0 \
      > "$O/g_pf.log" 2>&1
    say "gemm 16 threads --ab CLOVER_AMX_PF=0 (ms GMAC/s median, then with it: ms median with/w-o): $(grep -E '^q8_0' "$O/g_pf.log" | sed -E 's/ +/ /g')"
  fi
fi
dr_end
