#!/usr/bin/env bash
# Written in the 2026-12-05 02:35 session after share24's two calls (same session). The greedy pick's step 1 with 8
# indices in flight (src/cuda/ops_pick.cu: max_strided / sum_exp_strided; k_pick_greedy unrolled 8, the one-block
# form as before, the same bits) under CLOVER_CUDA_PICK_SPLIT=1, and the shared 8-bit rows now on by default
# (CLOVER_CUDA_SHARE_XQ=0 is the old path). Uses remap31's skewed 35B-A3B files (synthesised here in the
# background, remap31 reuses them), so its figures are not call 2's.
#   cmake --build build -j2 && scripts/device-packs.sh build pick24
#   run(command="bash .gpu-pick24/run.sh; ...", carry=[".gpu-pick24", ...])
# Predictions (before the run; share24 call 2: k_pick_greedy 96 us a 1-row step, 99 us at 16 rows, decode 315.2
# -> 318.8 tok/s with the split; k_pick (32 preview rows, one block each) 134 us):
#  - tests: all pass (test_pick_split: the split's ids and confidences equal the one-block kernel's).
#  - bench_cuda_backend decode: split 0 ~315, split 1 ~345-350 tok/s (k_pick_greedy ~10-15 us: 8 SMs, 8x the exps
#    in flight; -> ~85-95 us off a ~3.17 ms step).
#  - bench_cuda_preview 32 rows first pass coreset: split 1 ~0.1 ms under split 0 (k_pick 134 us -> ~15).
#  - ids: split 0 = split 1 on both files (diffusion and --ar).
set -uo pipefail
PACK=${PACK:-.gpu-pick24}
. "$PACK/lib.sh"
dr_init pick24
C=$D/bin/clover
F=/tmp/q35skew4nd.gguf FD=/tmp/q35skew4d.gguf
( [ -s $F ] || { timeout 150 "$C" synth --preset qwen3.5-35b-a3b --no-diffusion --route-skew 4 -o $F.part > $O/synth1.log 2>&1 && mv $F.part $F; }
  [ -s $FD ] || { timeout 150 "$C" synth --preset qwen3.5-35b-a3b --route-skew 4 -o $FD.part > $O/synth2.log 2>&1 && mv $FD.part $FD; } ) &
SPID=$!
tst test_cuda_ops pick 60 CLOVER_TEST_ONLY=test_pick,test_pick_split
tst test_cuda_ops pick-split 60 CLOVER_TEST_ONLY=test_pick,test_pick_split CLOVER_CUDA_PICK_SPLIT=1
tst test_cuda_matmul share 120 CLOVER_TEST_SMALL=1 CLOVER_TEST_ONLY=test_chunk_multi,test_few_rows,test_moe_chunk
for n in test_cuda_backend test_cuda_batch test_cuda_engine test_cuda_preview; do tst $n default 150; done
for n in test_cuda_backend test_cuda_preview; do tst $n split 150 CLOVER_CUDA_PICK_SPLIT=1; done
wait $SPID; say "synth done at +$(el)s"
for v in 0 1 0 1; do
  CLOVER_CUDA_PICK_SPLIT=$v timeout 60 "$D/bin/bench_cuda_backend" $F > "$O/backend_p$v.log" 2>&1
  say "bench_cuda_backend PICK_SPLIT=$v rc=$? at +$(el)s: $(grep -m1 -E '^decode' "$O/backend_p$v.log" | sed -E 's/ +/ /g')"
done
for v in 0 1; do
  CLOVER_CUDA_PICK_SPLIT=$v timeout 60 "$D/bin/bench_cuda_preview" $FD --reps 3 > "$O/preview_p$v.log" 2>&1
  say "== bench_cuda_preview PICK_SPLIT=$v rc=$? at +$(el)s"; grep -E "^(preview|commit|block)" "$O/preview_p$v.log" | cut -c1-100 | tee -a "$S"
done
for v in 0 1; do
  for f in $FD $F; do
    mode=""; [ $f = $F ] && mode=--ar
    CLOVER_CUDA_PICK_SPLIT=$v timeout 60 "$C" run -m $f --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual $mode --json \
      > "$O/run_p${v}_$(basename $f).json" 2> "$O/run_p${v}_$(basename $f).err"
    a=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1])).get('ids'))" "$O/run_p${v}_$(basename $f).json" 2>&1 | md5sum | cut -c1-12)
    say "clover run $(basename $f) ${mode:-diffusion} PICK_SPLIT=$v: ids $a"
  done
done
dr_end
