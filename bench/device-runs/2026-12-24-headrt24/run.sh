#!/usr/bin/env bash
# Written in the 2026-12-05 14:27 session (issue 24; not yet run when written). The GDN block operator's heads of a
# lone preview in tiles of 4 rows instead of 8 (gdn_block_fused.cu, k_block_head_fused<4>; by shape: 4 where the
# 8-row tiles give fewer blocks than SMs, CLOVER_CUDA_GDN_HEAD_RT=4|8 forces it): 32 value heads x 8 tiles = 256
# blocks instead of 128 on 132 SMs, each read-out thread 2 rows' chains instead of 4. pdlrows24's ncu: 57% of the
# kernel in the read-out (short scoreboard, "wait"), 8 warps an SM. Each output's operations are the 8-row tile's.
#   run(command="ITEMS='headrt24:t,b,r' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=600)
# STEPS (default "t b r"):
#  t  test_cuda_preview (gdn_head_once: 4-row tiles against 8-row tiles bit for bit, lone 1..64 rows and a stacked
#     preview, three geometries), test_cuda_backend, test_cuda_batch
#  b  bench_cuda_preview --reps 3, CLOVER_CUDA_GDN_HEAD_RT 8 / 0 (by shape: 4) / 8 / 0
#  r  clover run ids (diffusion) with 8 and 0: equal
# Predictions (before the run; pdlrows24, H100: preview 7.45-7.47 ms first pass, 7.83-7.90 half fixed): the heads
#  ~20 -> ~12 us a GDN layer in a graph: preview -0.15..-0.3 ms (7.2-7.3 on an H100), commit unchanged (no block
#  operator), block diffusion +2..+4%.
set -uo pipefail
PACK=${PACK:-.gpu-headrt24}
STEPS=${STEPS:-t b r}
. "$PACK/lib.sh"
dr_init headrt24
C=$D/bin/clover
dr_synth35
if has t; then
  tst test_cuda_preview rt 150
  grep -E "4-row" "$O/t_test_cuda_preview_rt.log" | head -3 | cut -c1-200 | tee -a "$S"
  for n in test_cuda_backend test_cuda_batch; do tst $n rt 150; done
fi
if has b; then
  wait $SPID
  for v in 8 0 8 0; do
    [ "$(el)" -lt 400 ] || { say "bench_cuda_preview: no time left for $v"; break; }
    CLOVER_CUDA_GDN_HEAD_RT=$v timeout 90 "$D/bin/bench_cuda_preview" $F --reps 3 > "$O/preview_$v.log" 2>&1
    say "== bench_cuda_preview --reps 3, CLOVER_CUDA_GDN_HEAD_RT=$v rc=$? at +$(el)s"
    grep -E "^(preview|commit|resolve|block)" "$O/preview_$v.log" | cut -c1-110 | tee -a "$S"
  done
fi
if has r; then
  wait $SPID
  for v in 8 0; do
    CLOVER_CUDA_GDN_HEAD_RT=$v timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos \
      --no-visual --json > "$O/run_$v.json" 2> "$O/run_$v.err"
  done
  dr_ids_cmp "$O/run_8.json" "$O/run_0.json" "clover run diffusion, HEAD_RT 8 / by shape"
fi
dr_end
