#!/usr/bin/env bash
# Written in the 2026-12-05 05:00 session (issue 30): the AMX level's Q4_K product through repacked panels
# (src/quant/gemm_amx_pack.h: each 16-row tile's super-block stored once as bytes, d*scale floats, dmin and min
# pairs, so the kernel no longer unpacks nibbles and scales per tile; its tile work pipelined a step ahead of the
# float steps; the same bits) on the H200 host (16-vCPU Xeon, AMX), beside the old path (CLOVER_AMX_Q4K_REPACK=0)
# and without the pipeline (CLOVER_AMX_Q4K_PIPE=0).
#   cmake --build build -j2 && EXTRA_BINS="bench_gemm_levels test_quant_amx test_gemm_amx_emu test_matmul_amx_emu" \
#     scripts/device-packs.sh build amx30
#   run(command="bash .gpu-amx30/run.sh", carry=[".gpu-amx30"], timeout_s=400)  (or riding after another call)
# STEPS (default "t g b"):
#  t  test_quant_amx (real tiles: the panels against the old kernel and the scalar oracle, bit for bit),
#     test_gemm_amx_emu, test_matmul_amx_emu
#  g  bench_gemm_levels q4_K 32 rows, 2048x2048 and 512x2048, 1 and 16 threads, --ab REPACK=0 and --ab PIPE=0
#  b  bench_backend on the 35B-A3B diffusion file, 16 threads: preview / commit / prompt 512 / decode, amx with the
#     panels (budget 40000 MiB: every expert; and the default 4096), amx REPACK=0, avx2; alternating
# Predictions (before the run; the host measured amx q4_K 82.5 GMAC/s on 1 thread, 1,033 on 16 at 2048x2048):
#  t: all pass.
#  g: 2048x2048 1 thread 95-130 GMAC/s, 16 threads 1,150-1,600; 512x2048 115-150 / 800-1,000; PIPE=0 between.
#  b: preview p=0.9 amx 0.133 -> ~0.115 s (moe 0.053 -> ~0.038), avx2 ~0.29: ratio ~2.5x (bar 3x); prompt 512
#     ~2.3 -> ~2.1 s; decode unchanged (1 row: no AMX).
set -uo pipefail
PACK=${PACK:-.gpu-amx30}
STEPS=${STEPS:-t g b}
. "$PACK/lib.sh"
dr_init amx30
unset CLOVER_AMX_Q4K_REPACK CLOVER_AMX_Q4K_PIPE CLOVER_AMX_Q4K_REPACK_MB CLOVER_NO_AMX CLOVER_NO_AVX512
say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) ($(nproc) cpus); load $(cut -d' ' -f1-3 /proc/loadavg)"
M=${AMX30_MODEL:-/tmp/synth35-clover.gguf}
SPID=
if has b && [ ! -s "$M" ]; then
  ( timeout 170 "$D/bin/clover" synth --preset qwen3.5-35b-a3b -o "$M.part" > "$O/synth.log" 2>&1 && mv "$M.part" "$M" ) &
  SPID=$!
fi
if has t; then
  tst test_quant_amx host 120
  tst test_gemm_amx_emu host 120
  tst test_matmul_amx_emu host 120
fi
if has g; then
  for t in 1 16; do for o in 2048 512; do for ab in CLOVER_AMX_Q4K_REPACK=0 CLOVER_AMX_Q4K_PIPE=0; do
    L=$O/g_${t}_${o}_${ab%%=*}.log
    timeout 60 "$D/bin/bench_gemm_levels" --threads $t --out $o --in 2048 --rows 32 --types q4_K --reps 30 --ab $ab > "$L" 2>&1
    say "bench_gemm_levels q4_K ${o}x2048 32 rows, $t thr, --ab $ab rc=$?:"
    grep -iE "q4_K|with|panel" "$L" | tail -4 | sed 's/^/    /' | tee -a "$S"
  done; done; done
fi
fig() { awk -v p="$2" 'index($0, p) == 1 && $0 ~ /median/ { for (i = 1; i <= NF; i++) if ($i == "median") { print $(i + 1); exit } }' "$1" 2>/dev/null; }
ops() { grep -A1 -E "^$2" "$1" 2>/dev/null | sed -n 2p | sed -E 's/ +/ /g; s/^ per run: //; s/ s;.*//'; }
if has b; then
  [ -z "$SPID" ] || { wait $SPID; say "synth at +$(el)s: $(tail -1 "$O/synth.log")"; }
  [ -s "$M" ] || { say "no model file $M"; dr_end; exit 3; }
  for c in panels:auto:CLOVER_AMX_Q4K_REPACK_MB=40000 old:auto:CLOVER_AMX_Q4K_REPACK=0 avx2:avx2: \
           panels4g:auto: panels:auto:CLOVER_AMX_Q4K_REPACK_MB=40000 old:auto:CLOVER_AMX_Q4K_REPACK=0; do
    IFS=: read -r tag lv envs <<< "$c"
    [ "$(el)" -lt "${AMX30_BUDGET:-330}" ] || { say "no time for $tag"; continue; }
    k=0; while [ -e "$O/b_$tag$k.log" ]; do k=$((k + 1)); done; L=$O/b_$tag$k.log
    env $envs timeout 90 "$D/bin/bench_backend" "$M" --threads 16 --prompt 512 --gen 4 --block 32 --rows 512 \
      --reps 3 --mb 256 --simd $lv > "$L" 2>&1
    say "$tag ($envs) rc=$? at +$(el)s: preview p=0.9 $(fig "$L" 'preview 32 rows, p') s ($(ops "$L" 'preview 32 rows, p')); commit 32 $(fig "$L" 'commit 32-row') s; prompt 512 $(fig "$L" 'prompt 512') s; generation $(fig "$L" 'generation') s"
  done
fi
dr_end
