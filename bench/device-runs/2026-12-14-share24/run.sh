#!/usr/bin/env bash
# Written in the 2026-12-04 20:39 session, NOT RUN (device lending paused after call 5): the next session's first
# call. The 8-bit rows made once for the products that share them (CLOVER_CUDA_SHARE_XQ=1, off by default until
# this run: cuda_matmul_chunk_ws_multi for qkv / z / alpha / beta and q / k / v; the dense pair; the experts' gate +
# up pair on one grouping), and an ncu look at the grouped expert kernel at 16 rows.
#   cmake --build build -j2 && EXTRA_BINS=libclover_kernel_trace.so scripts/device-packs.sh build share24
#   run(command="bash .gpu-share24/run.sh", carry=[".gpu-share24"], timeout_s=600)
# Step m was added in the 2026-12-04 22:50 session (lending paused again, not run): the MoE decode form of 1..32 rows
# (CLOVER_CUDA_MOE_DEC32=1) now through moe_fast.cu's kernel for Q4_K / Q5_K, narrowed (coreset) passes excluded.
# Step p too (same session): the greedy pick split over a cluster of 8 blocks (CLOVER_CUDA_PICK_SPLIT=1).
# Two calls (one does not fit 600 s): the default STEPS "t m x", then STEPS="p s b d n" (the same pack; steps run in the order of the file: t m p s x d b n):
#   run(command="STEPS='p s b d n' bash .gpu-share24/run.sh", carry=[".gpu-share24"], timeout_s=600)
# STEPS:
#  t  test_cuda_matmul test_chunk_multi / test_few_rows / test_moe_chunk / test_row_invariance / test_mma_rows /
#     test_exact_multi with CLOVER_CUDA_SHARE_XQ=1 (test_chunk_multi and test_few_rows set it themselves too);
#     backend, batch, engine, preview tests with it; clover run ids (diffusion and --ar) with it against call 2's
#     hashes (the same command: 7c7806005f9c / b33877c8fea2)
#  x  bench_cuda_preview --reps 3 with SHARE_XQ=0 and =1; the PDL-off kernel trace with =1 (quantisers a pass)
#  d  bench_cuda_decode (AR file): the steps (1 and 16 sequences), =0 and =1
#  m  test_cuda_matmul test_moe_dec32 / test_moe_fast / test_moe_decode / test_moe_many_experts (full size); backend,
#     batch, engine, preview tests and clover run ids with CLOVER_CUDA_MOE_DEC32=1; bench_cuda_decode and
#     bench_cuda_preview with DEC32=0 / 1 (and 1 + CLOVER_CUDA_MOE_DEC32_NARROW=1); the PDL-off trace of the 16-
#     sequence step with DEC32=1; ncu of moef_kernel at 16 rows
#  p  test_cuda_ops test_pick / test_pick_split; backend, batch, engine, preview tests with CLOVER_CUDA_PICK_SPLIT=1;
#     bench_cuda_backend's decode (device pick) with it off / on; the PDL-off trace of the 1-sequence
#     step with it on (k_pick_greedy's time)
#  b  bench_batch --device cuda at 1, 2, 4, 8, 16, 32 requests (prompt 32, gen 64; AR and diffusion files) with
#     CLOVER_CUDA_MOE_DEC32=1: issue 25's table
#  s  clover serve --device cuda, 16 chat requests against one at a time (issue 25's bar): the AR file 16 x 128 with
#     every new switch on (CLOVER_CUDA_MOE_DEC32=1 CLOVER_CUDA_SHARE_XQ=1 CLOVER_CUDA_PICK_SPLIT=1) and as is; the
#     diffusion file 16 x 64 with the switches on
#  n  ncu of igemm_kernel (the grouped experts' gate at 16 rows, bench_cuda_decode's ops) and igemm_q8_kernel:
#     DRAM %, occupancy, stall reasons
# Predictions (before the run):
#  t: all pass; ids hashes equal call 2's (the same bits).
#  x: quantiser launches a preview 401 -> ~200 (0.8 -> ~0.45 ms); preview 9.46 -> ~9.1 ms, commit 15.4 -> ~15.0
#     (=0 as exact24's new figures).
#  d: 16-sequence step 10.72 -> ~10.3 ms.
#  n: the expert kernel issue-bound (SM busy > DRAM %), DRAM ~30-40%.
#  s: AR 16 x 128 ratio 4.27x (snap24) -> ~5x with the switches on (the 16-sequence step ~9 ms), answers identical;
#     diffusion 16 x 64 ~2.5x.
#  p: all pass; the pick 107 us -> ~10-15 us a step (k_pick_greedy ~8 SMs' FP64 instead of one); decode (device
#     pick) 353 -> ~365 tok/s.
#  m: all pass (test_cuda_backend with CLOVER_CUDA_STACK_CHUNKS=1 too, which failed in moe24), test_moe_dec32 >= 10 cases through the fast form; ids hashes equal call 2's. 16-sequence step 10.72
#     -> ~9.0 ms (experts 4.75 -> ~3.0: gate + up ~118 MB at ~2.5 TB/s in one fused launch, no SwiGLU launch, down
#     ~59 MB ~25 us); commit 15.4 -> ~13.5; preview no coreset 8.5 -> ~7.8; preview coreset unchanged (narrow
#     excluded), with NARROW=1 slower (~11 ms). moef_kernel at 16 rows: DRAM 50-65%. Ops at 16 rows: gate + up
#     (fused) ~40-50 us against the chunk pair's ~80 + SwiGLU; down ~20-25 against ~38; CAP=8 (1 weight row a warp)
#     ~15-25% slower than CAP=2, CAP=3 within 5% of 2.
set -uo pipefail
PACK=${PACK:-.gpu-share24}
STEPS=${STEPS:-t m x}
. "$PACK/lib.sh"
dr_init share24
TR=$D/bin/libclover_kernel_trace.so
CL=/tmp/synth35-clover.gguf
( [ -s $CL ] || { timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b -o $CL.part > "$O/synth-cl.log" 2>&1 && mv $CL.part $CL; } ) & CPID=$!
dr_synth35 --no-diffusion
# TAG ENV...: `clover run` of both files (diffusion, --ar) with ENV; the ids' hash against call 2's
run_ids() {
  local tag=$1 f mode a; shift
  for f in $CL $F; do
    mode=""; [ $f = $F ] && mode=--ar
    env "$@" timeout 60 "$D/bin/clover" run -m $f --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual $mode --json \
      > "$O/run_${tag}_$(basename $f).json" 2> "$O/run_${tag}_$(basename $f).err"
    a=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1])).get('ids'))" "$O/run_${tag}_$(basename $f).json" 2>&1 | md5sum | cut -c1-12)
    say "clover run $(basename $f) ${mode:-diffusion} ($*): ids $a (call 2: diffusion 7c7806005f9c, --ar b33877c8fea2)"
  done
}
if has t; then
  tst test_cuda_matmul share 200 CLOVER_CUDA_SHARE_XQ=1 CLOVER_TEST_SMALL=1 CLOVER_TEST_ONLY=test_chunk_multi,test_few_rows,test_moe_chunk,test_row_invariance,test_mma_rows,test_exact_multi,test_chunk_types,test_glu,test_multi
  grep -E "chunk_ws_multi" "$O/t_test_cuda_matmul_share.log" | tee -a "$S"
  for n in test_cuda_backend test_cuda_batch test_cuda_engine test_cuda_preview; do tst $n share 150 CLOVER_CUDA_SHARE_XQ=1; done
  wait $CPID $SPID
  run_ids share CLOVER_CUDA_SHARE_XQ=1
fi
if has m; then
  tst test_cuda_matmul dec32 240 CLOVER_TEST_ONLY=test_moe_dec32,test_moe_fast,test_moe_decode,test_moe_many_experts
  grep -E "^  dec32 |^  fast" "$O/t_test_cuda_matmul_dec32.log" | tee -a "$S"
  for n in test_cuda_backend test_cuda_batch test_cuda_engine test_cuda_preview; do tst $n dec32 150 CLOVER_CUDA_MOE_DEC32=1; done
  tst test_cuda_batch dec32n 150 CLOVER_CUDA_MOE_DEC32=2 CLOVER_CUDA_MOE_DEC32_NARROW=1
  # the stacked prompt chunks with no chunk past its session's max_rows (moe24's decode_q8_small_rows failure)
  for n in test_cuda_backend test_cuda_batch test_cuda_engine; do tst $n chunks 150 CLOVER_CUDA_STACK_CHUNKS=1; done
  wait $CPID $SPID
  run_ids dec32 CLOVER_CUDA_MOE_DEC32=1
  for v in 0 1 0 1; do
    CLOVER_CUDA_MOE_DEC32=$v CLOVER_BENCH_DECODE_ROWS=0 timeout 100 "$D/bin/bench_cuda_decode" $F > "$O/decode_m$v.log" 2>&1
    say "== bench_cuda_decode CLOVER_CUDA_MOE_DEC32=$v rc=$? at +$(el)s"; grep -E "^STEP (seq|batched)" "$O/decode_m$v.log" | tee -a "$S"
  done
  for v in "0 0" "1 0" "1 1"; do
    set -- $v
    CLOVER_CUDA_MOE_DEC32=$1 CLOVER_CUDA_MOE_DEC32_NARROW=$2 timeout 120 "$D/bin/bench_cuda_preview" $CL --reps 3 > "$O/preview_m$1$2.log" 2>&1
    say "== bench_cuda_preview --reps 3, CLOVER_CUDA_MOE_DEC32=$1 NARROW=$2 rc=$? at +$(el)s"
    grep -E "^(preview|commit|resolve|block)" "$O/preview_m$1$2.log" | cut -c1-110 | tee -a "$S"
  done
  [ "$(el)" -lt 420 ] && CLOVER_CUDA_MOE_DEC32=1 CLOVER_CUDA_PDL=0 CLOVER_BENCH_DECODE_TRACE=1 CLOVER_BENCH_DECODE_ROWS=0 CLOVER_TRACE_OUT=$R/trace_decode_m.txt \
    LD_PRELOAD=$TR timeout 100 "$D/bin/bench_cuda_decode" $F > "$O/decode_m_trace.log" 2>&1
  say "== bench_cuda_decode trace, DEC32=1, PDL off rc=$? at +$(el)s"
  [ -f $R/trace_decode_m.txt ] && c++filt < $R/trace_decode_m.txt > $R/trace_decode_m.dm.txt && rm $R/trace_decode_m.txt && \
    awk '/^== window 2/{f=1} f' $R/trace_decode_m.dm.txt | head -14 | cut -c1-150 | tee -a "$S"
  # the ops alone at 16 rows (no model): the grouped expert products' time, the old chunk form against the new
  # (and the fast form's slots a group past 8 rows: 2, the default, against 8 and 3)
  for v in "0 2" "1 2" "1 8" "1 3"; do
    set -- $v
    CLOVER_CUDA_MOE_DEC32=$1 CLOVER_CUDA_MOEF_CAP=$2 CLOVER_BENCH_DECODE_ROWS=16 timeout 90 "$D/bin/bench_cuda_decode" > "$O/ops16_m$1$2.log" 2>&1
    say "== bench_cuda_decode ops at 16 rows, CLOVER_CUDA_MOE_DEC32=$1 CLOVER_CUDA_MOEF_CAP=$2 rc=$?"
    grep -iE "experts" "$O/ops16_m$1$2.log" | cut -c1-150 | tee -a "$S"
  done
  if command -v ncu > /dev/null && [ "$(el)" -lt 320 ]; then
    CLOVER_CUDA_MOE_DEC32=1 CLOVER_BENCH_DECODE_ROWS=16 timeout 90 ncu -k regex:moef_kernel -c 2 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
      "$D/bin/bench_cuda_decode" > "$O/ncu_moef.log" 2>&1
    say "ncu moef_kernel (16 rows: gate + up fused, then down) rc=$?:"
    grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Grid Size|Dynamic Shared|Warp Cycles Per Issued|L2 Hit" "$O/ncu_moef.log" | head -24 | tee -a "$S"
  fi
fi
if has p; then
  tst test_cuda_ops pick 120 CLOVER_TEST_ONLY=test_pick,test_pick_split
  for n in test_cuda_backend test_cuda_batch test_cuda_engine test_cuda_preview; do tst $n pick 150 CLOVER_CUDA_PICK_SPLIT=1; done
  wait $SPID
  for v in 0 1; do
    CLOVER_CUDA_PICK_SPLIT=$v timeout 90 "$D/bin/bench_cuda_backend" $F > "$O/backend_p$v.log" 2>&1
    say "bench_cuda_backend CLOVER_CUDA_PICK_SPLIT=$v rc=$?: $(grep -E "decode" "$O/backend_p$v.log" | head -3 | tr '\n' ' ' | cut -c1-240)"
  done
  CLOVER_CUDA_PICK_SPLIT=1 CLOVER_CUDA_PDL=0 CLOVER_BENCH_DECODE_TRACE=1 CLOVER_BENCH_DECODE_ROWS=0 CLOVER_TRACE_OUT=$R/trace_decode_p.txt \
    LD_PRELOAD=$TR timeout 100 "$D/bin/bench_cuda_decode" $F > "$O/decode_p_trace.log" 2>&1
  say "== bench_cuda_decode trace, PICK_SPLIT=1, PDL off rc=$? at +$(el)s"
  [ -f $R/trace_decode_p.txt ] && c++filt < $R/trace_decode_p.txt > $R/trace_decode_p.dm.txt && rm $R/trace_decode_p.txt && \
    grep -E "^==|pick" $R/trace_decode_p.dm.txt | cut -c1-150 | tee -a "$S"
fi
if has s; then
  wait $CPID $SPID
  ON="CLOVER_CUDA_MOE_DEC32=1 CLOVER_CUDA_SHARE_XQ=1 CLOVER_CUDA_PICK_SPLIT=1"
  dr_serve $F "$ON" 16 128 1 ar-on
  dr_serve $F "" 16 128 1 ar-as-is
  dr_serve $CL "$ON" 16 64 1 diffusion-on
fi
if has x; then
  wait $CPID
  for sh in 0 1; do
    CLOVER_CUDA_SHARE_XQ=$sh timeout 120 "$D/bin/bench_cuda_preview" $CL --reps 3 > "$O/preview_$sh.log" 2>&1
    say "== bench_cuda_preview --reps 3, CLOVER_CUDA_SHARE_XQ=$sh rc=$? at +$(el)s"
    grep -E "^(preview|commit|resolve|block)" "$O/preview_$sh.log" | cut -c1-110 | tee -a "$S"
  done
  CLOVER_CUDA_SHARE_XQ=1 CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$R/trace_preview.txt LD_PRELOAD=$TR timeout 150 "$D/bin/bench_cuda_preview" $CL --profile \
    > "$O/preview_profile.log" 2>&1
  say "== bench_cuda_preview --profile, PDL off, under the tracer rc=$? at +$(el)s"
  [ -f $R/trace_preview.txt ] && c++filt < $R/trace_preview.txt > $R/trace_preview.dm.txt && rm $R/trace_preview.txt && \
    grep -E "^(==|cuda_kernel)" $R/trace_preview.dm.txt | tee -a "$S" && \
    awk '/^== window 2/{f=1;next} /^== window 3/{f=0} f' $R/trace_preview.dm.txt | grep -E "quantize|group" | cut -c1-150 | tee -a "$S"
fi
if has d; then
  wait $SPID
  for sh in 0 1; do
    CLOVER_CUDA_SHARE_XQ=$sh CLOVER_BENCH_DECODE_ROWS=0 timeout 100 "$D/bin/bench_cuda_decode" $F > "$O/decode_$sh.log" 2>&1
    say "== bench_cuda_decode CLOVER_CUDA_SHARE_XQ=$sh rc=$? at +$(el)s"; grep -E "^STEP (seq|batched)" "$O/decode_$sh.log" | tee -a "$S"
  done
fi
if has b; then
  wait $CPID $SPID
  for f in $F $CL; do
    [ "$(el)" -lt 430 ] || { say "bench_batch: no time left for $(basename $f)"; continue; }
    CLOVER_CUDA_MOE_DEC32=1 timeout 120 "$D/bin/bench_batch" $f --device cuda --n 1,2,4,8,16,32 --prompt 32 --gen 64 \
      > "$O/bench_batch_$(basename $f).log" 2>&1
    say "bench_batch $(basename $f) DEC32=1 rc=$? at +$(el)s:"; tail -12 "$O/bench_batch_$(basename $f).log" | cut -c1-160 | tee -a "$S"
  done
fi
if has n && command -v ncu > /dev/null; then
  for k in "igemm_kernel" "igemm_q8_kernel"; do
    [ "$(el)" -lt 420 ] || { say "ncu: no time left for $k"; continue; }
    CLOVER_BENCH_DECODE_ROWS=16 timeout 90 ncu --kernel-name-base demangled -k "regex:^$k" -c 1 --section SpeedOfLight \
      --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
      "$D/bin/bench_cuda_decode" > "$O/ncu_$k.log" 2>&1
    say "ncu $k (16 rows) rc=$?:"
    grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Grid Size|Block Limit|Dynamic Shared|Warp Cycles Per Issued|L2 Hit|L1/TEX Hit" "$O/ncu_$k.log" | head -20 | tee -a "$S"
    grep -iE "^ +(OPT|INF) .*(stall|issue|occupancy)" -A2 "$O/ncu_$k.log" | head -12 | cut -c1-220 | tee -a "$S"
  done
fi
dr_end
