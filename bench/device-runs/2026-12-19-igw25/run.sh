#!/usr/bin/env bash
# Written in the 2026-12-05 05:00 session (issues 25 and 24). stack25's N=16 trace: a stacked preview of 16
# sequences spends ~20 ms of its ~53 in the grouped experts' igemm_kernel<Q4_K> with tiles of 32 slots x 16
# outputs (150 us gate, 150 us up, 216 us down a layer): every 16-output block re-reads its 32 rows' 8-bit
# chunks from L2 (~1.1 GB a product). CLOVER_CUDA_IGW_MOE=1 runs the grouped experts on
# matmul_igemm_wide.cu's igw_k_kernel (tiles of 64 slots x 128 outputs, the same bits). Also the ncu of
# k_router on one eager decode pass (stack25's ncu matched nothing: the ops mode uses the two-launch router).
# And the split merge of a stacked preview's attention (attn_combine_kernel: 512 rows x 16 heads of 1024-thread
# blocks, 320 us a layer in stack25's trace) with a block of head_dim threads: CLOVER_CUDA_ATTN_COMB_ROWS=64.
#   cmake --build build -j2 && EXTRA_BINS=libclover_kernel_trace.so scripts/device-packs.sh build igw25
#   run(command="bash .gpu-igw25/run.sh", carry=[".gpu-igw25"], timeout_s=600)
# STEPS (default "t b s n"):
#  t  test_cuda_matmul test_moe_igw (+ test_moe_chunk, test_igemm_wide) and memcheck of test_moe_igw;
#     test_cuda_attention (the two merges bit for bit on every case);
#     test_cuda_batch / engine / preview / backend with IGW_MOE=1 (STACK_ROUTE / STACK_GDN on by default now);
#     clover run diffusion ids with IGW_MOE 0 / 1
#  b  bench_batch diffusion N 1,4,16: neither, IGW_MOE=1, and IGW_MOE=1 COMB_ROWS=64; bench_cuda_backend --prompt-only 1 with 0 / 1 (a 512-row
#     prompt's experts take it too: ~16 slots an expert); the PDL-off trace of N=16 with 1
#  s  serve diffusion 16 x 64 with IGW_MOE=1 COMB_ROWS=64 and as is
#  n  ncu of k_router (one eager decode pass, CLOVER_BENCH_DECODE_NCU=1)
# Predictions (before the run):
#  t: every case bit-identical, memcheck 0; ids equal 0 / 1 (7c7806005f9c).
#  b: N=16 stacked pass ~53 -> ~40 ms: the experts ~517 -> ~150 us a layer (gate/up ~40 us, down ~60); N=16 agg
#     227 -> ~280-300 tok/s; N=1 / 4 unchanged (a 32-row block's 256 slots keep the wide few-slot tiles).
#     COMB_ROWS=64: the merge 320 -> ~60-90 us a layer: N=16 a further ~2.5 ms a pass (+5%).
#     Prompt 512 within +-5% (16 slots an expert: half of a 64-slot tile's warps idle, but 8x fewer row re-reads).
#  s: diffusion 16 x 64 2.19x -> ~2.6-2.9x, answers identical.
#  n: k_router ~10-12 us under ncu; DRAM < 10%; most stalls long scoreboard / membar / barrier.
set -uo pipefail
PACK=${PACK:-.gpu-igw25}
STEPS=${STEPS:-t b s n}
. "$PACK/lib.sh"
dr_init igw25
TR=$D/bin/libclover_kernel_trace.so
C=$D/bin/clover
CL=/tmp/synth35-clover.gguf
( [ -s $CL ] || { timeout 150 "$C" synth --preset qwen3.5-35b-a3b -o $CL.part > "$O/synth-cl.log" 2>&1 && mv $CL.part $CL; } ) & CPID=$!
if has t; then
  tst test_cuda_matmul igw 200 CLOVER_TEST_ONLY=test_moe_igw,test_moe_chunk,test_igemm_wide
  tst test_cuda_attention comb 120
  grep -E "igw moe" "$O/t_test_cuda_matmul_igw.log" | head -8 | cut -c1-150 | tee -a "$S"
  if command -v compute-sanitizer > /dev/null; then
    CLOVER_TEST_ONLY=test_moe_igw timeout 200 compute-sanitizer --tool memcheck "$D/bin/test_cuda_matmul" > "$O/memcheck.log" 2>&1
    say "memcheck test_moe_igw rc=$?: $(grep -E 'ERROR SUMMARY' "$O/memcheck.log" | tail -1)"
  fi
  for n in test_cuda_batch test_cuda_engine test_cuda_preview test_cuda_backend; do
    tst $n igw 150 CLOVER_CUDA_IGW_MOE=1 CLOVER_CUDA_ATTN_COMB_ROWS=64
  done
  wait $CPID
  for v in 0 1; do
    CLOVER_CUDA_IGW_MOE=$v CLOVER_CUDA_ATTN_COMB_ROWS=$((64 * v)) timeout 60 "$C" run -m $CL --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual --json \
      > "$O/run_i$v.json" 2> "$O/run_i$v.err"
    a=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1])).get('ids'))" "$O/run_i$v.json" 2>&1 | md5sum | cut -c1-12)
    say "clover run diffusion IGW_MOE=COMB_ROWS/64=$v: ids $a (stack25: 7c7806005f9c)"
  done
fi
if has b; then
  wait $CPID
  for c in none:0:0 igw:1:0 both:1:64; do
    IFS=: read -r tag v cr <<< "$c"
    [ "$(el)" -lt 360 ] || { say "bench_batch: no time left for $tag"; continue; }
    CLOVER_CUDA_IGW_MOE=$v CLOVER_CUDA_ATTN_COMB_ROWS=$cr timeout 150 "$D/bin/bench_batch" $CL --device cuda --n 1,4,16 \
      --prompt 32 --gen 64 > "$O/bench_batch_$tag.log" 2>&1
    say "bench_batch diffusion $tag (IGW_MOE=$v COMB_ROWS=$cr) rc=$? at +$(el)s:"
    sed -n 2,6p "$O/bench_batch_$tag.log" | cut -c1-160 | tee -a "$S"
  done
  for v in 0 1 0 1; do
    [ "$(el)" -lt 420 ] || break
    CLOVER_CUDA_IGW_MOE=$v timeout 60 "$D/bin/bench_cuda_backend" $CL --prompt-only 1 > "$O/prompt_$v.log" 2>&1
    say "prompt-only IGW_MOE=$v rc=$?: $(grep -E "prompt of 512|chunk commit" "$O/prompt_$v.log" | tr -s ' ' | tr '\n' ';')"
  done
  if [ "$(el)" -lt 430 ]; then
    CLOVER_CUDA_IGW_MOE=1 CLOVER_CUDA_ATTN_COMB_ROWS=64 CLOVER_CUDA_PDL=0 LD_PRELOAD=$TR timeout 100 "$D/bin/bench_batch" $CL --device cuda --n 16 \
      --prompt 32 --gen 32 > "$O/trace_b16.log" 2>&1
    say "== bench_batch N=16 trace (IGW_MOE=1, PDL off) rc=$?"; grep -A16 "== window" "$O/trace_b16.log" | cut -c1-170 | tee -a "$S"
  fi
fi
if has s; then
  wait $CPID
  dr_serve $CL "CLOVER_CUDA_IGW_MOE=1 CLOVER_CUDA_ATTN_COMB_ROWS=64" 16 64 1 diffusion-igw
  dr_serve $CL "" 16 64 1 diffusion-as-is
fi
if has n && command -v ncu > /dev/null && [ "$(el)" -lt 530 ]; then
  CLOVER_BENCH_DECODE_ROWS=0 CLOVER_BENCH_DECODE_NCU=1 timeout 90 ncu --profile-from-start off --kernel-name-base demangled -k "regex:k_router" -c 2 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
    "$D/bin/bench_cuda_decode" $CL > "$O/ncu_router.log" 2>&1
  say "== ncu k_router rc=$?"
  grep -E "k_router|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Stall|Registers|Warp Cycles" \
    "$O/ncu_router.log" | head -30 | tee -a "$S"
fi
dr_end
