#!/usr/bin/env bash
# Issue 31, branch off31: the CUDA backend's layer range, so that `--gpu-layers N --device cuda` runs layers
# [0, N) on the GPU (only their weights uploaded, only their KV / GDN state) and [N, L) plus the head on the CPU
# through the split backend (src/offload/split.c). Written without a device: OFF unless CLOVER_CUDA_LAYER_RANGE=1
# (without it --gpu-layers on CUDA is main's one-line refusal). This run is its first check; if t passes and the
# b lines are as predicted, the next session may flip the default.
# Run from the source root on the device (the pack is .gpu-off31/, ignored by git; this file is also committed as
# bench/device-runs/2026-12-06-off31/run.sh):
#   run(command="bash .gpu-off31/run.sh", carry=[".gpu-off31"], timeout_s=240)     <= 200 s by its limits
# STEPS (default "t b"):
#  t  test_cuda_split (split CUDA[0,N)+CPU[N,L) vs all-CPU on tiny_clover and tiny_ar, N = 1, L/2, L-1, and L:
#     prompt, decode, preview with and without the coreset, block commit, state; every generation case's tokens
#     = the reference's and the all-CPU run's), then test_cuda_backend and test_cuda_engine (the whole-model
#     path, unchanged) and test_split (CPU + CPU, unchanged)
#  b  the 35B-A3B synthetic file (made here, ~1 min, in the background while t runs): `clover run --ar` 64
#     tokens, --device cuda alone (the baseline), then --gpu-layers 10, 20, 40 with the switch, decode tok/s and
#     the GPU memory used (nvidia-smi's peak during the run minus before it); --gpu-layers 20 without the switch
#     (main's one-line refusal); one block-diffusion run at --gpu-layers 20 (preview + commit through the split)
# Outputs: $OUT/summary.txt and $OUT/logs.tgz.
# Predictions (before any run; "before" = bench/device-runs/2026-12-04-verify/RESULTS.md and the amx2 pack's
# CPU figures: 35B-A3B decode on CUDA alone ~120-150 tok/s (serve sequential 148.7), on this host's CPU ~20 tok/s):
#  - t: all pass; test_cuda_split's rel errs ~1e-7..1e-6 (f32, the whole-model CUDA run's 1.6e-7..3.3e-7 per layer),
#    bound 1e-4; every generation run has the reference's tokens. Risk: the window of weights (token_embd and
#    blk.0..N-1) misses a tensor some layer reads (then an illegal address or garbage logits: the rel err says).
#  - b: decode per token ~ N/40 x ~9 ms (eager GPU pass: a range's decode is not a captured graph) + (40-N)/40 x
#    ~50 ms (CPU) + the head on the CPU: N=10 ~25 tok/s (20-30), N=20 ~33 tok/s (28-40), N=40 = the whole model on
#    CUDA (a plain session) ~120-150 tok/s. GPU memory: weights window + KV for 2048 tokens + scratch + context:
#    N=10 ~6-7 GB, N=20 ~11-12 GB, N=40 ~21-24 GB (the baseline's). The --ar ids at N=10/20 may differ from N=40's
#    late (the CPU and GPU products round differently; the synthetic model's margins are small).
set -uo pipefail
PACK=${PACK:-.gpu-off31}
R=${OUT:-/tmp/out}; mkdir -p "$R"; O=/tmp/off31logs; rm -rf $O; mkdir -p $O
D=/tmp/off31; rm -rf "$D"; mkdir -p "$D"
T0=$(date +%s)
tar xJf "$PACK/pack.txz" -C "$D" || { echo "unpack failed" | tee "$R/summary.txt"; exit 2; }
export LD_LIBRARY_PATH=$D/lib CLOVER_SOURCE_DIR=$PWD PYTHONUNBUFFERED=1
unset CLOVER_CUDA_LAYER_RANGE
STEPS=${STEPS:-t b}
has() { [[ " $STEPS " == *" $1 "* ]]; }
S=$R/summary.txt
say() { echo "$*" | tee -a "$S"; }
el() { echo $(( $(date +%s) - T0 )); }
say "start $(date -u +%T) steps: $STEPS pack $(cat "$PACK/COMMIT" 2>/dev/null)"
timeout 10 nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader 2>&1 | tee -a "$S"
F=/tmp/q35d.gguf
if has b; then ( [ -s $F ] || { timeout 120 "$D/bin/clover" synth --preset qwen3.5-35b-a3b -o $F.part > "$O/synth.log" 2>&1 && mv $F.part $F; } ) & fi
if has t; then
  for n in test_cuda_split test_cuda_backend test_cuda_engine test_split; do
    [ -x "$D/bin/$n" ] || { say "test $n: not in the pack"; continue; }
    s=$(date +%s); timeout 60 "$D/bin/$n" > "$O/t_$n.log" 2>&1; rc=$?
    say "test $n rc=$rc $(( $(date +%s) - s ))s $(tail -1 "$O/t_$n.log")   [predicted rc=0]"
    [ $rc = 0 ] || grep -E "FAIL|differ|error|rel err" "$O/t_$n.log" | head -8 | tee -a "$S"
  done
  grep -oE "rel err [0-9.e+-]+" "$O/t_test_cuda_split.log" | awk '{ n++; if ($3 + 0 > w) w = $3 + 0 }
    END { printf "test_cuda_split: %d comparisons, worst rel err %.3g   [predicted ~1e-7..1e-6; bound 1e-4]\n", n, w }' | tee -a "$S"
  grep -E "generation runs" "$O/t_test_cuda_split.log" | tee -a "$S"
fi
mem_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1; }
IDS=$(seq -s, 1000 1027)
run_one() { # LABEL PREDICTION ENV... -- ARGS...
  local label=$1 pred=$2; shift 2
  local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local base; base=$(mem_used); local peak=${base:-0} log="$O/run_$label.log"
  env ${envs[@]+"${envs[@]}"} timeout 60 "$D/bin/clover" run -m $F --ids $IDS -c 2048 "$@" > "$log" 2>&1 &
  local pid=$!
  while kill -0 $pid 2>/dev/null; do
    local m; m=$(mem_used); [ -n "$m" ] && [ "$m" -gt "$peak" ] && peak=$m; sleep 0.2
  done
  wait $pid; local rc=$?
  local rate; rate=$(grep -E "^rate" "$log" | tail -1 | sed 's/^rate *//')
  local ids; ids=$(grep -E "^ids:" "$log" | md5sum | cut -c1-8)
  say "$label rc=$rc: ${rate:-$(tail -1 "$log")}; GPU +$(( (peak - ${base:-0}) ))MiB (peak $peak MiB); ids $ids   [$pred]"
}
if has b; then
  wait; say "synth done $(date -u +%T) ($(el)s) $(ls -l $F 2>/dev/null | awk '{print $5}') bytes"
  A=(--ar --max-tokens 64 --ignore-eos)
  run_one cuda-alone "predicted ~120-150 tok/s, ~21-24 GB" -- "${A[@]}" --device cuda
  run_one ngl20-switch-off "predicted rc=1, main's one line 'not implemented yet'" -- "${A[@]}" --device cuda --gpu-layers 20
  grep -h "gpu-layers" "$O/run_ngl20-switch-off.log" | head -1 | tee -a "$S"
  run_one ngl10 "predicted ~25 tok/s (20-30), ~6-7 GB" CLOVER_CUDA_LAYER_RANGE=1 -- "${A[@]}" --device cuda --gpu-layers 10
  run_one ngl20 "predicted ~33 tok/s (28-40), ~11-12 GB" CLOVER_CUDA_LAYER_RANGE=1 -- "${A[@]}" --device cuda --gpu-layers 20
  run_one ngl40 "predicted = cuda-alone (the whole model, a plain CUDA session)" CLOVER_CUDA_LAYER_RANGE=1 -- "${A[@]}" --device cuda --gpu-layers 40
  [ "$(el)" -lt 150 ] && run_one ngl20-diffusion "predicted rc=0, ~10-20 tok/s (previews + commits through the split)" \
    CLOVER_CUDA_LAYER_RANGE=1 -- --max-tokens 32 --ignore-eos --device cuda --gpu-layers 20
  grep -hE "^(time|passes|coreset)" "$O/run_ngl20-diffusion.log" 2>/dev/null | head -3 | tee -a "$S"
fi
say "end $(date -u +%T) ($(el)s)"
(cd "$O" && tar czf "$R/logs.tgz" .)
