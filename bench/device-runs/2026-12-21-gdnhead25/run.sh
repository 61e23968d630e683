#!/usr/bin/env bash
# Written in the session of 2026-12-21 (issues 24 and 25; no device was lent: this has not run). The GDN block
# operator's heads in the head-once form (src/cuda/gdn_block_fused.cu, CLOVER_CUDA_GDN_HEAD_ONCE=1, off by
# default): a block a (sequence, value head) over all its row tiles, G = 4 groups of 256 threads a tile each, the
# head's 64 KiB state, k, v and q rows copied once (112 KB a block) instead of once a tile (4 x ~100 KB for a 32-row
# block): a stacked preview of 16 sequences moves 57 MB instead of 205 MB through L2 in 512 blocks instead of 2,048.
# The same float operations in the same order for every output (the tile form's step functions), so the same bits.
#   cmake --build build -j2 && EXTRA_BINS=libclover_kernel_trace.so scripts/device-packs.sh build gdnhead25
#   run(command="bash .gpu-gdnhead25/run.sh", carry=[".gpu-gdnhead25"], timeout_s=600)
#   then, if a step was cut for time: run(command="STEPS=b bash .gpu-gdnhead25/run.sh", carry=[".gpu-gdnhead25"])
# STEPS (default "t k b"):
#  t  test_cuda_preview's gdn_head_once alone (lone blocks of 1..64 rows and a stack of 8 sequences of 1..32 rows,
#     the 35B-A3B heads and two small odd geometries, groups by shape / 1 / 2 / 4: bit for bit against the tile
#     form, states untouched, the launches counted, the oracle within 1e-4), its memcheck (CLOVER_TEST_SMALL);
#     test_cuda_preview (all of it: gdn_block_forms then compares head-once with the four-launch form) /
#     test_cuda_batch / test_cuda_engine with the switch on; clover run diffusion ids off / on
#  k  bench_batch diffusion N 1,16 off / on (the stacked preview: 16 x 32 rows); the PDL-off kernel trace of N=16
#     with it on (k_block_head_once_multi<4>'s time a GDN layer) and, if time is left, off
#  b  bench_cuda_preview --reps 3 (preview, 32-row commit, block diffusion) with the switch 0 / 1 / 0 / 1; the
#     PDL-off trace of bench_cuda_preview --profile with 1 then 0 (the lone preview's heads a window)
# Knob for a follow-up call (read once): CLOVER_CUDA_GDN_HEAD_ONCE_G=1|2|4 (groups a block; default by shape: 4
# from 3 tiles up, halved while shared memory does not fit).
# Predictions (before the run):
#  t: every case passes: gdn_head_once 144 cases bit for bit (144 launches), states untouched, oracle within
#     ~1e-6 of max(1, max|ref|) (gdn_block_forms' figure); memcheck 0 errors; test_cuda_preview / batch / engine
#     pass with it on; ids equal off / on (7c7806005f9c, igw25's hash).
#  k: N=16 trace: k_block_head_once_multi<4> grid 32,1,16 x 1024 threads ~100-130 us a GDN layer where
#     k_block_head_fused_multi (grid 32,4,16) took 194 (igw25); k_block_conv_l2_multi unchanged (~49 us). The stacked
#     pass -1.9..-2.8 ms (30 GDN layers): agg tok/s at N=16 +3-6% (igw25's both: 255 -> ~263-270); N=1 within noise.
#  b: the lone preview's heads: k_block_head_once<4> grid 32 ~equal to 3 us slower than k_block_head_fused's grid
#     32,4 (32 SMs run 4 tiles' read-outs each where 128 ran one); preview / commit / block diffusion within +-1%
#     (the commit does not take this operator). If it is slower, the switch should take the stacked form only.
set -uo pipefail
PACK=${PACK:-.gpu-gdnhead25}
STEPS=${STEPS:-t k b}
. "$PACK/lib.sh"
dr_init gdnhead25
TR=$D/bin/libclover_kernel_trace.so
dr_synth35 # the 35B-A3B diffusion file in the background: F, SPID
CL=$F
# the GDN block operator's kernels of each window of a trace file (demangled)
gdn_lines() {
  [ -f "$1" ] || { say "no trace $1"; return; }
  c++filt < "$1" > "${1%.txt}.dm.txt" && rm "$1"
  grep -E "^== window|k_block_head|k_block_conv" "${1%.txt}.dm.txt" | cut -c1-150 | tee -a "$S"
}
if has t; then
  tst test_cuda_preview once 200 CLOVER_TEST_ONLY=gdn_head_once
  grep -E "head-once vs tiles" "$O/t_test_cuda_preview_once.log" | cut -c1-170 | tee -a "$S"
  if command -v compute-sanitizer > /dev/null && [ "$(el)" -lt 200 ]; then
    CLOVER_TEST_SMALL=1 CLOVER_TEST_ONLY=gdn_head_once timeout 200 compute-sanitizer --tool memcheck \
      "$D/bin/test_cuda_preview" > "$O/memcheck.log" 2>&1
    say "memcheck gdn_head_once (small) rc=$?: $(grep -E 'ERROR SUMMARY' "$O/memcheck.log" | tail -1)"
  fi
  for n in test_cuda_preview test_cuda_batch test_cuda_engine; do tst $n on 200 CLOVER_CUDA_GDN_HEAD_ONCE=1; done
  grep -E "two launches vs four|head-once vs tiles" "$O/t_test_cuda_preview_on.log" | cut -c1-170 | tee -a "$S"
  wait $SPID
  for v in 0 1; do
    CLOVER_CUDA_GDN_HEAD_ONCE=$v timeout 60 "$D/bin/clover" run -m $CL --device cuda --ids $(seq -s, 11 40) -n 64 \
      --ignore-eos --no-visual --json > "$O/run_h$v.json" 2> "$O/run_h$v.err"
    a=$(dr_ids "$O/run_h$v.json")
    say "clover run diffusion CLOVER_CUDA_GDN_HEAD_ONCE=$v: ids $a (igw25: 7c7806005f9c)"
  done
  python3 - "$O/run_h0.json" "$O/run_h1.json" <<'PY' 2>&1 | tee -a "$S"
import json, sys
try:
    a, b = (json.load(open(p)).get('ids') or [] for p in sys.argv[1:3])
except Exception as e:
    print("ids: cannot compare:", e); sys.exit(0)
d = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
where = d if d is not None else min(len(a), len(b))
print("ids off / on: %s (%d / %d ids)" % ("equal" if a == b else "first difference at %s" % where, len(a), len(b)))
PY
fi
if has k; then
  wait $SPID
  for v in 0 1; do
    [ "$(el)" -lt 430 ] || { say "bench_batch: no time left for HEAD_ONCE=$v"; break; }
    CLOVER_CUDA_GDN_HEAD_ONCE=$v timeout 150 "$D/bin/bench_batch" $CL --device cuda --n 1,16 --prompt 32 --gen 64 \
      > "$O/bench_batch_h$v.log" 2>&1
    say "bench_batch diffusion CLOVER_CUDA_GDN_HEAD_ONCE=$v rc=$? at +$(el)s:"
    sed -n 2,5p "$O/bench_batch_h$v.log" | cut -c1-160 | tee -a "$S"
  done
  for v in 1 0; do
    [ "$(el)" -lt 470 ] || { say "N=16 trace HEAD_ONCE=$v: no time left"; break; }
    CLOVER_CUDA_GDN_HEAD_ONCE=$v CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$R/trace_b16_h$v.txt LD_PRELOAD=$TR timeout 100 \
      "$D/bin/bench_batch" $CL --device cuda --n 16 --prompt 32 --gen 32 > "$O/trace_b16_h$v.log" 2>&1
    say "== bench_batch N=16 trace (HEAD_ONCE=$v, PDL off) rc=$? at +$(el)s"
    gdn_lines $R/trace_b16_h$v.txt
  done
fi
if has b; then
  wait $SPID
  for v in 0 1 0 1; do
    [ "$(el)" -lt 480 ] || { say "bench_cuda_preview: no time left for HEAD_ONCE=$v"; break; }
    CLOVER_CUDA_GDN_HEAD_ONCE=$v timeout 120 "$D/bin/bench_cuda_preview" $CL --reps 3 > "$O/preview_h$v.log" 2>&1
    say "== bench_cuda_preview --reps 3, CLOVER_CUDA_GDN_HEAD_ONCE=$v rc=$? at +$(el)s"
    grep -E "^(preview|commit|resolve|block)" "$O/preview_h$v.log" | cut -c1-110 | tee -a "$S"
  done
  for v in 1 0; do
    [ "$(el)" -lt 500 ] || { say "preview trace HEAD_ONCE=$v: no time left"; break; }
    CLOVER_CUDA_GDN_HEAD_ONCE=$v CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$R/trace_preview_h$v.txt LD_PRELOAD=$TR \
      timeout 100 "$D/bin/bench_cuda_preview" $CL --profile > "$O/preview_profile_h$v.log" 2>&1
    say "== bench_cuda_preview --profile, CLOVER_CUDA_GDN_HEAD_ONCE=$v, PDL off, under the tracer rc=$? at +$(el)s" \
      "(windows: 1 prompt commit, 2 preview coreset, 3 no coreset, 4 block commit, 5 eager preview)"
    gdn_lines $R/trace_preview_h$v.txt
  done
fi
dr_end
