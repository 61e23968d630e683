#!/usr/bin/env bash
# Written in the 2026-12-04 22:50 session (device lending paused: NOT RUN). Issue 31: --gpu-mem with the expert
# pool kept by the device (CLOVER_GPU_MEM_REMAP=device, src/cuda/expert_remap.cu): no routing read-back a layer,
# the passes captured as graphs again. Against the host path (the default) and, when the pack carries
# llama.txz (the dev VM's CUDA llama-bench), llama.cpp's best split at the same budgets in the same call.
#   cmake --build build -j2 && scripts/device-packs.sh build remap31
#   (peer: cp /tmp/llama.txz .gpu-remap31/; scripts/device-tree.sh hide; move tests/fixtures/llamacpp_bf16/model.gguf
#    out of the tree; afterwards scripts/device-tree.sh restore and move it back)
#   run(command="bash .gpu-remap31/run.sh", carry=[".gpu-remap31"], timeout_s=600)
# STEPS (default "t c l"):
#  t  test_cuda_gpumem (every host mode, the device remap at both budgets and for tokens, its refusal without the
#     host copy); compute-sanitizer memcheck of its q8_0 case with the remap only
#  c  the 35B-A3B files with --route-skew 4 (AR and diffusion): `clover run --ar` all-device (reference ids), then
#     --gpu-mem 16 / 8 with REMAP=host and =device (ids against the reference); `clover bench` decode at 16 / 8,
#     host vs device, alternating; `clover bench` on the diffusion file at 16 / 8 with REMAP=device (prompt 512,
#     preview, commit, block diffusion); GPU memory peaks
#  l  llama-bench -ngl 99 -fa 1 -p 0 -n 32 --n-cpu-moe 8 / 11 (16 GiB) and 27 / 30 (8 GiB), peaks sampled
# Predictions (before the run):
#  t: all pass; memcheck clean.
#  c: ids equal to the reference in every run. Decode (bench, warm pool) host 16 GiB ~80 / 8 GiB ~63 (split31:
#     80.4 / 63.5); device 16 GiB ~150 (2.8 ms of compute + the misses' ~170 MB at ~45-50 GB/s over the bus), 8 GiB
#     ~70-80. GPU peak within the budget + ~0.6 GiB (the CUDA context), as split31.
#  l: as split31 (N=8 109.1 at 16 GiB, N=27 63.7 at 8 GiB). Bar: device remap faster at both budgets (predicted
#     1.3-1.4x at 16 GiB, ~1.1-1.2x at 8 GiB).
set -uo pipefail
PACK=${PACK:-.gpu-remap31}
STEPS=${STEPS:-t c l}
. "$PACK/lib.sh"
dr_init remap31
unset CLOVER_GPU_MEM_STATS CLOVER_GPU_MEM_HOST CLOVER_GPU_MEM_POLICY CLOVER_GPU_MEM_PIN CLOVER_GPU_MEM_REMAP
C=$D/bin/clover
F=/tmp/q35skew4nd.gguf FD=/tmp/q35skew4d.gguf
( [ -s $F ] || { timeout 150 "$C" synth --preset qwen3.5-35b-a3b --no-diffusion --route-skew 4 -o $F.part > $O/synth1.log 2>&1 && mv $F.part $F; }
  [ -s $FD ] || { timeout 150 "$C" synth --preset qwen3.5-35b-a3b --route-skew 4 -o $FD.part > $O/synth2.log 2>&1 && mv $FD.part $FD; } ) &
SPID=$!
mrun() { dr_mrun "$@"; }
if has t; then
  tst test_cuda_gpumem all 200
  grep -E "pool on the device|tokens|FAIL" "$O/t_test_cuda_gpumem_all.log" | head -12 | tee -a "$S"
  if command -v compute-sanitizer > /dev/null; then
    CLOVER_TEST_ONLY=q8_0 timeout 150 compute-sanitizer --tool memcheck --leak-check no "$D/bin/test_cuda_gpumem" > $O/memcheck.log 2>&1
    say "memcheck test_cuda_gpumem q8_0 rc=$?: $(grep -E 'ERROR SUMMARY' $O/memcheck.log | tail -1)"
  fi
fi
if has c; then
  wait $SPID; say "synth done at +$(el)s"
  IDS=1000,1001,1002,1003,1004,1005,1006,1007
  RUN=(run -m $F --ids $IDS --ar -n 32 -c 1024 --device cuda)
  ids() { grep -m1 '^ids:' $O/$1.log; }
  mrun A 40 $C "${RUN[@]}"; grep -E '^time' $O/A.log | tee -a "$S"
  for g in 16 8; do
    for r in host device; do
      mrun R$g$r 60 env CLOVER_GPU_MEM_REMAP=$r $C "${RUN[@]}" --gpu-mem $g
      say "   ids $([ -n "$(ids A)" ] && [ "$(ids A)" = "$(ids R$g$r)" ] && echo 'equal to the all-device run' || echo DIFFER); $(grep -E '^time' $O/R$g$r.log)"
    done
  done
  for g in 16 8; do
    for r in host device host device; do
      mrun C$g$r 40 env CLOVER_GPU_MEM_REMAP=$r $C bench -m $F --prompt-tokens 64 --decode-tokens 32 --device cuda --gpu-mem $g || break
      grep -vE '^gpu-mem' $O/C$g$r.log | grep -iE "decode|hit" | tail -3 | tee -a "$S"
    done
  done
  for g in 16 8; do
    mrun B$g 80 env CLOVER_GPU_MEM_REMAP=device $C bench -m $FD --prompt-tokens 512 --decode-tokens 32 --device cuda --gpu-mem $g
    grep -vE '^gpu-mem' $O/B$g.log | tail -14 | tee -a "$S"
  done
fi
if has l; then
  LB=$D/llama/llama-bench
  [ -s "$PACK/llama.txz" ] && tar xJf "$PACK/llama.txz" -C "$D"
  if [ -x $LB ]; then
    for n in 8 27 11 30; do
      mrun L$n 45 env LD_LIBRARY_PATH=$D/llama:/usr/local/cuda/lib64:$D/lib $LB -m $F -ngl 99 -fa 1 -p 0 -n 32 -r 2 -t 16 --n-cpu-moe $n -o csv || break
      grep -E 'avg_ts|,' $O/L$n.log | tail -1 | cut -d, -f1,30- | tee -a "$S"
    done
  else say "llama-bench not carried: no peer in this run"; fi
fi
dr_end
