#!/usr/bin/env bash
# Written in the 2026-12-05 11:42 session (issue 31): its bar in one call. clover --gpu-mem 16 / 8 with this
# session's defaults (prefetch on, the sweep policy, the host's share off unless said) against llama.cpp's best
# split at the same GPU memory, on the 35B-A3B files with --route-skew 4, everything in the same call; the peak GPU
# memory of every run sampled (nvidia-smi, 100 ms: the CUDA context included for both engines), and llama.cpp's
# best split taken among the runs whose peak is at most clover's at that budget.
#   cmake --build build -j2 && EXTRA_BINS="libclover_kernel_trace.so bench_backend bench_ops" \
#     scripts/device-packs.sh build seq && cp /tmp/llama.txz .gpu-seq/   (scripts/llama-cuda-pack.sh /tmp/llama.txz)
#   run(command="ITEMS='final31:t,c,l' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"], timeout_s=600)
# STEPS (default "t c l"):
#  t  test_cuda_gpumem (every case: the pool bit for bit, prefetch, the host's share within its bounds)
#  c  clover: `clover run --ar` and diffusion ids at --gpu-mem 16 / 8 against the all-device run; `clover bench`
#     (prompt 512, decode, 32-row preview, block commit, block diffusion) on the diffusion file and decode on the
#     --no-diffusion file, all-device, 16 and 8 GiB, with CLOVER_GPU_MEM_STATS=1 (hit rates, the link's GB/s)
#  d  (added after seq3's c, l) decode alone, no diagnostics on: `clover bench --prompt-tokens 64 --decode-tokens 64`
#     at 16 / 8 GiB with the host's share off (the default) and CLOVER_GPU_MEM_CPU=auto, then llama-bench's best splits
#     of seq3 under clover's peaks (--n-cpu-moe 10 and 27) again
#  l  llama-bench -ngl 99 -fa 1 -p 0 -n 32 -r 3 on the --no-diffusion file: --n-cpu-moe 6 8 10 11 12 14 (near 16 GiB)
#     and 24 26 27 28 30 (near 8 GiB), and -ngl 30 28 26 / 14 12 10 (whole layers on the host), each with its peak
# Predictions (before the run; H100 2026-12-05 08:52 with prefetch: 138.4 / 75.9 tok/s; H200 remap31: llama
#  16 GiB --n-cpu-moe 11 87.8, 8 GiB --n-cpu-moe 27 66.3 / 30 63.1):
#  t: every case passes (the host's share: f32 within 1e-4, the quantised files within 1.5x the CPU backend's
#     distance).
#  c: ids equal at both budgets; decode (no-diffusion file) 16 GiB ~130-145, 8 GiB ~72-82 tok/s; all-device ~300+;
#     prompt 512 at 16 GiB ~1,000-1,900 (sweep), preview ~10 ms (hit ~99%), commit ~35 (16) / ~60 ms (8).
#  l: best split 16 GiB ~85-90, 8 GiB ~63-67 tok/s; -ngl splits slower than --n-cpu-moe's. Bar: clover faster at
#     both budgets.
set -uo pipefail
PACK=${PACK:-.gpu-final31}
STEPS=${STEPS:-t c l}
. "$PACK/lib.sh"
dr_init final31
unset CLOVER_GPU_MEM_STATS CLOVER_GPU_MEM_HOST CLOVER_GPU_MEM_POLICY CLOVER_GPU_MEM_PIN CLOVER_GPU_MEM_REMAP \
  CLOVER_GPU_MEM_CPU CLOVER_GPU_MEM_CPU_THREADS CLOVER_GPU_MEM_PREFETCH
say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) ($(nproc) cpus)"
C=$D/bin/clover
FN=/tmp/q35skew4nd.gguf FD=/tmp/q35skew4d.gguf
( [ -s $FN ] || { timeout 170 "$C" synth --preset qwen3.5-35b-a3b --no-diffusion --route-skew 4 -o $FN.part \
    > $O/synth-nd.log 2>&1 && mv $FN.part $FN; } ) &
PN=$!
( [ -s $FD ] || { timeout 170 "$C" synth --preset qwen3.5-35b-a3b --route-skew 4 -o $FD.part \
    > $O/synth-d.log 2>&1 && mv $FD.part $FD; } ) &
PD=$!
peak() { sort -n "$O/mem_$1.txt" 2>/dev/null | tail -1; }
if has t; then
  tst test_cuda_gpumem all 240
  grep -E "CPU backend|host|FAIL" "$O/t_test_cuda_gpumem_all.log" | head -24 | cut -c1-230 | tee -a "$S"
fi
if has c; then
  wait $PN $PD; say "synth done at +$(el)s: $(ls -la $FN $FD 2>&1 | awk '{print $5}' | tr '\n' ' ')"
  IDS=$(seq -s, 11 40)
  for g in 0 16 8; do
    mem=(); [ $g = 0 ] || mem=(--gpu-mem $g)
    timeout 90 $C run -m $FN --device cuda --ar --ids $IDS -n 64 -c 1024 --ignore-eos --no-visual --json "${mem[@]}" \
      > $O/A$g.json 2> $O/A$g.err
    timeout 90 $C run -m $FD --device cuda --ids $IDS -n 64 -c 1024 --ignore-eos --no-visual --json "${mem[@]}" \
      > $O/D$g.json 2> $O/D$g.err
    if [ $g != 0 ]; then dr_ids_cmp $O/A0.json $O/A$g.json "--ar $g GiB"; dr_ids_cmp $O/D0.json $O/D$g.json "diffusion $g GiB"; fi
  done
  for g in 0 16 8; do
    mem=(); [ $g = 0 ] || mem=(--gpu-mem $g)
    dr_mrun N$g 90 env CLOVER_GPU_MEM_STATS=1 $C bench -m $FN --prompt-tokens 512 --decode-tokens 64 --device cuda "${mem[@]}"
    say "  clover decode (no-diffusion file) ${g:-all} GiB, peak $(peak N$g) MiB:"
    grep -vE '^gpu-mem' $O/N$g.log | grep -E '^(prompt|decode)|hit rate' | tee -a "$S"
    dr_mrun B$g 120 env CLOVER_GPU_MEM_STATS=1 $C bench -m $FD --prompt-tokens 512 --decode-tokens 32 --device cuda "${mem[@]}"
    say "  clover passes (diffusion file) $g GiB, peak $(peak B$g) MiB:"
    grep -vE '^gpu-mem' $O/B$g.log | grep -E '^(prompt|decode|preview|commit|block)|hit rate' | tee -a "$S"
  done
fi
if has d; then
  wait $PN
  for g in 16 8; do
    for cpu in off auto; do
      dr_mrun Q$g$cpu 60 env CLOVER_GPU_MEM_CPU=$cpu $C bench -m $FN --prompt-tokens 64 --decode-tokens 64 --device cuda \
        --gpu-mem $g
      say "  clover $g GiB, host share $cpu, peak $(peak Q$g$cpu) MiB: $(grep -E '^decode' $O/Q$g$cpu.log)"
    done
  done
  LB=$D/llama/llama-bench
  [ -s "$PACK/llama.txz" ] && [ ! -x $LB ] && tar xJf "$PACK/llama.txz" -C "$D"
  for n in 10 27; do
    [ -x $LB ] || break
    dr_mrun LD$n 45 env LD_LIBRARY_PATH=$D/llama:/usr/local/cuda/lib64:$D/lib $LB -m $FN -ngl 99 --n-cpu-moe $n -fa 1 \
      -p 0 -n 32 -r 3 -t 16 -o csv > /dev/null || continue
    say "  llama --n-cpu-moe $n: $(grep -E '^"' $O/LD$n.log | tail -1 | awk -F'","' '{print $(NF-1)}') tok/s, peak $(peak LD$n) MiB"
  done
fi
if has l; then
  wait $PN
  LB=$D/llama/llama-bench
  [ -s "$PACK/llama.txz" ] && tar xJf "$PACK/llama.txz" -C "$D"
  if [ -x $LB ]; then
    # L31_SPLITS (added 2026-12-05 14:27): a shorter list of --n-cpu-moe values, e.g. "8 10 11 12 26 27 28 30"
    splits=("--n-cpu-moe 8" "--n-cpu-moe 11" "--n-cpu-moe 27" "--n-cpu-moe 30" "--n-cpu-moe 6" "--n-cpu-moe 10" \
        "--n-cpu-moe 12" "--n-cpu-moe 14" "--n-cpu-moe 24" "--n-cpu-moe 26" "--n-cpu-moe 28" "-ngl 30" "-ngl 28" \
        "-ngl 26" "-ngl 14" "-ngl 12" "-ngl 10")
    if [ -n "${L31_SPLITS:-}" ]; then splits=(); for n in $L31_SPLITS; do splits+=("--n-cpu-moe $n"); done; fi
    for a in "${splits[@]}"; do
      [ "$(el)" -lt 560 ] || { say "no time for llama-bench $a"; break; }
      t=L$(echo "$a" | tr -dc '0-9a-z')
      ngl=(-ngl 99); case "$a" in -ngl*) ngl=() ;; esac
      dr_mrun $t 45 env LD_LIBRARY_PATH=$D/llama:/usr/local/cuda/lib64:$D/lib $LB -m $FN "${ngl[@]}" $a -fa 1 -p 0 \
        -n 32 -r 3 -t 16 -o csv > /dev/null || continue
      say "  llama $a: $(grep -E '^"' $O/$t.log | tail -1 | awk -F'","' '{print $(NF-1)}') tok/s, peak $(peak $t) MiB"
    done
  else say "llama-bench not carried: no peer in this run"; fi
fi
dr_end
