#!/usr/bin/env bash
# Written in the 2026-12-05 08:52 session (no device lent: NOT RUN). Issue 31: --gpu-mem's misses computed by the
# host CPU instead of copied (CLOVER_GPU_MEM_CPU=auto|all, src/cuda/backend_cuda_experts_host.c, the hook
# offload/expert_host_cpu.c, the plan backend/expert_split.c) and the next layer's guessed experts prefetched
# (CLOVER_GPU_MEM_PREFETCH=1, backend_cuda_experts.c), against the copies alone (the default) and llama.cpp's
# best --n-cpu-moe split at the same budgets in the same call.
#   cmake --build build -j2 && scripts/device-packs.sh build hostmiss31 && cp /tmp/llama.txz .gpu-hostmiss31/
#   (hide models/ with scripts/device-tree.sh hide and move tests/fixtures/llamacpp_bf16/model.gguf out of the
#    tree; afterwards restore both)
#   run(command="bash .gpu-hostmiss31/run.sh", carry=[".gpu-hostmiss31"], timeout_s=600)
# STEPS (default "t c l"):
#  t  test_cuda_gpumem (its host_share cases: all and auto within the cross-backend bound, host misses > 0, nothing
#     copied under all, the refusals; prefetch bit for bit at both budgets and for tokens)
#  m  (not by default: a later call) compute-sanitizer memcheck of test_cuda_gpumem's q8_0 case
#  c  the 35B-A3B file with --route-skew 4: `clover run --ar` all-device (reference ids) and at --gpu-mem 16 / 8
#     with CPU=auto, CPU=all and PREFETCH=1 (ids compared: prefetch must be equal; the host's share equal where
#     the margins exceed the bound, a difference reported); `clover bench` decode at 16 / 8 with: off (the
#     default), pf (PREFETCH=1), auto (CPU=auto), autopf (both), all (CPU=all); then off and autopf again;
#     CLOVER_GPU_MEM_STATS=1 (the host's misses, its time, the plan's rates, the guesses used)
#  p  (not by default: a later call or riding the seq pack) the pool's default policy, sweep (expert_cache.h: LRU
#     but the most recent victim in a step that uses most of its layer's experts), against CLOVER_GPU_MEM_POLICY=lru
#     on a prompt of 2,048 tokens (4 chunks of 512: chunks 2-4 find the first's experts or not) at 16 / 8 GiB,
#     alternating twice; `clover run --ar` ids with each policy equal to the all-device run's
#  l  llama-bench -ngl 99 -fa 1 -p 0 -n 32 --n-cpu-moe 8 / 11 (16 GiB) and 27 / 30 (8 GiB)
# Predictions (before the run):
#  t: all pass; memcheck clean.
#  c: decode tok/s at 16 GiB off ~100-106 (remap31: 100.1 / 101.4), pf ~110-125 (the copies overlap ~2.9 ms of
#     compute a token; guesses used ~60-80%), auto ~120-150, autopf ~130-160, all ~80-110 (every use on the host:
#     40 x 8 x 1.77 MB = 566 MB a token from host memory at ~60-80 GB/s effective on 16 threads, no hit ever); at
#     8 GiB off ~66-72, pf ~75-85, auto ~90-120, autopf ~95-125, all as at 16. ids: prefetch equal; the host's
#     share equal in most runs (its arithmetic is the CPU's: a near-tie may flip; reported).
#  p: prompt 2,048 at 16 GiB lru ~1,000-1,100 tok/s (every chunk sweeps all 40 layers' experts over the link,
#     remap31's 512-token figure 1,020), sweep ~1,800-2,300 (chunks 2-4 hit ~70%: the 4,096-token trace's 86.5%
#     at 16 GiB counts decode too); at 8 GiB lru ~850-1,000, sweep ~1.1-1.2x that (~24% of the sweep resident).
#     ids equal under both policies (a slot's contents never change a product's bits).
#  l: as remap31 (16 GiB: 83.8 / 87.8; 8 GiB: 66.3 / 63.1). Bar (issue 31): decode faster than llama.cpp's best
#     split at both budgets (already so with off); this run says what the host's share adds.
set -uo pipefail
PACK=${PACK:-.gpu-hostmiss31}
STEPS=${STEPS:-t c l}
. "$PACK/lib.sh"
dr_init hostmiss31
unset CLOVER_GPU_MEM_STATS CLOVER_GPU_MEM_HOST CLOVER_GPU_MEM_POLICY CLOVER_GPU_MEM_PIN CLOVER_GPU_MEM_REMAP \
  CLOVER_GPU_MEM_CPU CLOVER_GPU_MEM_CPU_THREADS
say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) ($(nproc) cpus)"
C=$D/bin/clover
F=/tmp/q35skew4nd.gguf
( [ -s $F ] || { timeout 150 "$C" synth --preset qwen3.5-35b-a3b --no-diffusion --route-skew 4 -o $F.part \
    > $O/synth1.log 2>&1 && mv $F.part $F; } ) &
SPID=$!
mrun() { dr_mrun "$@"; }
if has t; then
  tst test_cuda_gpumem all 240
  grep -E "host|prefetch|tokens|FAIL" "$O/t_test_cuda_gpumem_all.log" | head -20 | tee -a "$S"
fi
if has m; then
  if command -v compute-sanitizer > /dev/null; then
    CLOVER_TEST_ONLY=q8_0 timeout 200 compute-sanitizer --tool memcheck --leak-check no \
      "$D/bin/test_cuda_gpumem" > $O/memcheck.log 2>&1
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
    for m in auto all pf; do
      if [ $m = pf ]; then E=(CLOVER_GPU_MEM_PREFETCH=1); else E=(CLOVER_GPU_MEM_CPU=$m); fi
      mrun R$g$m 90 env "${E[@]}" $C "${RUN[@]}" --gpu-mem $g
      say "   ids $([ -n "$(ids A)" ] && [ "$(ids A)" = "$(ids R$g$m)" ] && echo 'equal to the all-device run' || echo "DIFFER: $(ids A) | $(ids R$g$m)"); $(grep -E '^time' $O/R$g$m.log)"
    done
  done
  for g in 16 8; do
    for m in off pf auto autopf all off autopf; do
      [ "$(el)" -lt 470 ] || { say "no time for $g $m"; break; }
      case $m in
        off) E=(CLOVER_GPU_MEM_CPU=off) ;; pf) E=(CLOVER_GPU_MEM_PREFETCH=1) ;; auto) E=(CLOVER_GPU_MEM_CPU=auto) ;;
        autopf) E=(CLOVER_GPU_MEM_CPU=auto CLOVER_GPU_MEM_PREFETCH=1) ;; all) E=(CLOVER_GPU_MEM_CPU=all) ;;
      esac
      k=0; while [ -e "$O/C$g$m$k.log" ]; do k=$((k + 1)); done
      mrun C$g$m$k 60 env CLOVER_GPU_MEM_STATS=1 "${E[@]}" $C bench -m $F --prompt-tokens 64 \
        --decode-tokens 32 --device cuda --gpu-mem $g || break
      say "  $g GiB $m:"
      grep -vE '^gpu-mem' $O/C$g$m$k.log | grep -iE "decode|hit" | tail -2 | tee -a "$S"
      grep -E '^gpu-mem: (the host computed|prefetch:)|hit rate' $O/C$g$m$k.log | tail -3 | tee -a "$S"
    done
  done
fi
if has p; then
  wait $SPID
  for pol in lru sweep; do
    mrun P$pol 60 env CLOVER_GPU_MEM_POLICY=$pol $C run -m $F --ids 1000,1001,1002,1003,1004,1005,1006,1007 --ar -n 32 \
      -c 1024 --device cuda --gpu-mem 8
    say "   ids ($pol, 8 GiB): $(grep -m1 '^ids:' $O/P$pol.log | md5sum | cut -c1-12)"
  done
  for g in 16 8; do
    for pol in lru sweep lru sweep; do
      [ "$(el)" -lt 540 ] || { say "no time for prompt $g $pol"; break; }
      k=0; while [ -e "$O/Q$g$pol$k.log" ]; do k=$((k + 1)); done
      mrun Q$g$pol$k 60 env CLOVER_GPU_MEM_POLICY=$pol CLOVER_GPU_MEM_STATS=1 $C bench -m $F --prompt-tokens 2048 \
        --decode-tokens 8 --device cuda --gpu-mem $g || break
      say "  $g GiB $pol: $(grep -E '^prompt' $O/Q$g$pol$k.log | head -1) | $(grep -E 'hit rate' $O/Q$g$pol$k.log | tail -1)"
    done
  done
fi
if has l; then
  LB=$D/llama/llama-bench
  [ -s "$PACK/llama.txz" ] && tar xJf "$PACK/llama.txz" -C "$D"
  if [ -x $LB ]; then
    for n in 8 27 11 30; do
      [ "$(el)" -lt 560 ] || { say "no time for llama-bench $n"; break; }
      mrun L$n 45 env LD_LIBRARY_PATH=$D/llama:/usr/local/cuda/lib64:$D/lib $LB -m $F -ngl 99 -fa 1 -p 0 -n 32 -r 2 \
        -t 16 --n-cpu-moe $n -o csv || break
      grep -E 'avg_ts|,' $O/L$n.log | tail -1 | cut -d, -f1,30- | tee -a "$S"
    done
  else say "llama-bench not carried: no peer in this run"; fi
fi
dr_end
