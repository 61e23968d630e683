#!/usr/bin/env bash
# Issue 31, branch gpumem31: `--gpu-mem N` (GiB) with a CUDA expert cache. Dense tensors, KV and states on the
# device; the routed experts in a pool of fixed-size slots (src/cuda/backend_cuda_experts.c) of what is left of
# N GiB, copied per MoE layer from the mapped file pinned in place (cudaHostRegister, read-only; else a pinned
# staging buffer) on a second stream; the expert kernels read slot ids in place of expert ids (no kernel
# change). Written without a device: OFF unless CLOVER_CUDA_GPU_MEM=1 (without it --gpu-mem on CUDA is a
# one-line refusal; nothing changes without --gpu-mem). This run is its first check; if t passes and the ids
# are equal, the next session may drop the switch (backend_cuda.c's cuda_probe).
# Run from the source root on the device (the pack is .gpu-gpumem31/, ignored by git; this file is also
# committed as bench/device-runs/2026-12-07-gpumem31/run.sh):
#   scripts/device-packs.sh build gpumem31     (on the dev VM, from a CUDA build of the branch)
#   run(command="bash .gpu-gpumem31/run.sh", carry=[".gpu-gpumem31"], timeout_s=600)     ~5 min
# STEPS (default "t m b"):
#  t  test_cuda_gpumem (q8_0 and q4_k_m widened tiny models, route skew 4: logits of a prompt, decode steps,
#     previews with and without the coreset, the exported state, and greedy AR and block-diffusion tokens through
#     the public API, each bit-equal to the all-device run, at budgets of every expert, 1.5 layers' experts and
#     half the experts, with the staging path and LFU, and a 24 x 64-expert model whose 1,536 slots take the new
#     grouping kernel of the chunk form (moe_group_pool_kernel); pool bytes <= budget after every call; the
#     refusals and the CLOVER_CUDA_GPU_MEM gate),
#     then test_cuda_backend, test_cuda_engine and test_cuda_batch (the all-device path, which must be unchanged)
#  m  compute-sanitizer memcheck of test_cuda_gpumem's q8_0 case (the pool's slot reads and copies)
#  b  the 35B-A3B synthetic file with --route-skew 4 (made here in the background while t runs, ~1 min):
#     `clover bench -b 512` (prompt 512 in one pass, decode 32, two 32-row blocks of block diffusion; --gpu-mem's
#     default chunk is 512 rows, the all-device run is given the same) all-device, then at --gpu-mem
#     16 and 8 (CLOVER_GPU_MEM_STATS=1: the budget's split and the whole run's hit rate / bandwidth), 8 with LFU,
#     8 through staging; `clover run --ar` 64 tokens and one block-diffusion answer all-device and at 8 / 16 GiB
#     (the ids' md5 must be equal); GPU memory peak at --gpu-mem 8; --gpu-mem 2 refused (dense part 2.5 GiB);
#     `clover check --device cuda` (per-layer errors against the CPU) all-device and at --gpu-mem 8: equal.
# Outputs: $OUT/summary.txt and $OUT/logs.tgz.
# Predictions (before any run). The 35B-A3B q4_k_m file: 40 x 256 experts of 1,769,472 bytes (16.9 GiB), the
# rest ~2.5 GiB (dense). Reserve (one session at bench's ~800-token context, 512 rows of scratch (the logits
# alone 0.5 GB), a GDN checkpoint, 64 MiB margin) ~0.8-1.1 GiB. So --gpu-mem 8: pool ~4.5 GiB = ~2,750 slots
# (27% of the experts); --gpu-mem 16: ~12.5 GiB = ~7,600 slots (74%). All-device figures to compare
# (2026-12-07-verify: off31's cuda-alone 212 tok/s --ar, dec's 4.26 ms decode step, k4l's prompt 512 5,156
# tok/s; 2026-12-04-verify: 32-row preview ~12 ms, block commit ~16 ms): decode ~200 tok/s (graph; an eager
# step ~6 ms), prompt 512 ~5,000 tok/s. Under --gpu-mem a pass is eager (no graph) and syncs once per MoE layer
# (40 x ~20-40 us) to read the routing back; the copies are not overlapped with compute (no prefetch yet).
#  - t: all pass (rc 0); test_cuda_gpumem prints slots / hits / misses per budget, every comparison equal.
#    Risks: a bits difference would point at the chunk form's tiles (n_expert_plan) or a slot read before its
#    copy landed (the event); "the mapping cannot be pinned in place" on stderr = the staging path everywhere.
#  - m: 0 errors.
#  - b: host-to-device bandwidth from the pinned mapping 35-50 GB/s (PCIe 5.0 x16; parts of 590 KB, one copy
#    each); through staging 5-12 GB/s (a host memcpy first).
#    prompt 512 (one 512-row pass, cold pool, ~all 256 experts a layer): ~17-18 GB copied, hit rate 0-5%,
#    ~0.5-0.8 s = 650-1,000 tok/s at both budgets (LRU keeps nothing of a cyclic 40-layer sweep larger than
#    the pool); the grouping of rows by slot for > 1,024 ids is the new moe_group_pool_kernel (block-wide
#    scan, a few us a call; t's many_slots case checks its bits).
#    decode (its cache line includes the decode request's 16-row prompt pass, mostly misses):
#    8 GiB hit rate 25-50% (the simulator's LRU on skew-4 traces: 30% at 4 GiB, 52% at 8 GiB pools),
#    ~200 misses a token (~0.37 GB, ~9 ms at 40 GB/s) + ~6 ms eager pass + 40 syncs (~1 ms) -> ~16 ms a token
#    = ~60 tok/s (range 40-80); 16 GiB hit rate 65-85%, ~70 misses (~0.12 GB, ~3 ms) -> ~10 ms = ~95 tok/s
#    (range 70-130).
#    LFU at 8 GiB: decode hit rate +0-5 points over LRU (the simulator: +3 at 8 GiB, +4 at 4 GiB).
#    preview (32 rows, the coreset keeps ~21 experts a layer on this file: off31's run): 8 GiB 25-50 ms, 16 GiB
#    15-30 ms; commit of a 32-row block (no coreset: ~130-180 experts a layer, ~6,000 uses, most of them misses
#    after the previews' and decode's small sets): 8 GiB 150-300 ms, 16 GiB 80-250 ms; so block diffusion end to
#    end is bound by its commits' copies (a few tok/s to ~15 tok/s).
#    tokens: the --ar and the block-diffusion ids at 8 and 16 GiB equal the all-device run's (same md5).
#    GPU memory at --gpu-mem 8: 8,000-8,900 MiB used (8,192 MiB of clover's allocations at most + the CUDA
#    context, ~300-600 MiB). --gpu-mem 2: exit 1, one line "the dense weights alone ... need 2.5x GiB".
set -uo pipefail
PACK=${PACK:-.gpu-gpumem31}
R=${OUT:-/tmp/out}; mkdir -p "$R"; O=/tmp/gpumem31logs; rm -rf $O; mkdir -p $O
D=/tmp/gpumem31; rm -rf "$D"; mkdir -p "$D"
T0=$(date +%s)
tar xJf "$PACK/pack.txz" -C "$D" || { echo "unpack failed" | tee "$R/summary.txt"; exit 2; }
export LD_LIBRARY_PATH=$D/lib CLOVER_SOURCE_DIR=$PWD PYTHONUNBUFFERED=1
unset CLOVER_GPU_MEM_STATS CLOVER_GPU_MEM_POLICY CLOVER_GPU_MEM_STAGING CLOVER_CUDA_GPU_MEM
STEPS=${STEPS:-t m b}
has() { [[ " $STEPS " == *" $1 "* ]]; }
S=$R/summary.txt
say() { echo "$*" | tee -a "$S"; }
el() { echo $(( $(date +%s) - T0 )); }
say "start $(date -u +%T) steps: $STEPS pack $(cat "$PACK/COMMIT" 2>/dev/null)"
timeout 10 nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader 2>&1 | tee -a "$S"
# SYNTH (a dry run elsewhere: SYNTH="--preset tiny --type q8_0 --route-skew 4" F=/tmp/tiny4.gguf)
F=${F:-/tmp/q35skew4.gguf}
SYNTH=${SYNTH:---preset qwen3.5-35b-a3b --route-skew 4}
if has b; then
  ( [ -s $F ] || { timeout 180 "$D/bin/clover" synth $SYNTH -o $F.part > "$O/synth.log" 2>&1 && mv $F.part $F; } ) &
fi
if has t; then
  for n in test_cuda_gpumem test_cuda_backend test_cuda_engine test_cuda_batch; do
    [ -x "$D/bin/$n" ] || { say "test $n: not in the pack"; continue; }
    s=$(date +%s); timeout 150 "$D/bin/$n" > "$O/t_$n.log" 2>&1; rc=$?
    say "test $n rc=$rc $(( $(date +%s) - s ))s $(tail -1 "$O/t_$n.log")   [predicted rc=0]"
    [ $rc = 0 ] || grep -E "FAIL|differ|error|budget" "$O/t_$n.log" | head -8 | tee -a "$S"
  done
  grep -E "slots of|tokens \(mode|cannot be pinned" "$O/t_test_cuda_gpumem.log" | head -16 | tee -a "$S"
fi
if has m; then
  if command -v compute-sanitizer > /dev/null; then
    s=$(date +%s)
    CLOVER_TEST_ONLY=q8_0 timeout 240 compute-sanitizer --tool memcheck "$D/bin/test_cuda_gpumem" > "$O/memcheck.log" 2>&1
    rc=$?
    say "memcheck test_cuda_gpumem [q8_0] rc=$rc $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY' "$O/memcheck.log" | tail -1) $(grep -E 'passed, [0-9]+ failed|SKIP' "$O/memcheck.log" | tail -1)   [predicted 0 errors]"
    grep -m6 -E "Invalid|Error:|out of bounds|misaligned" "$O/memcheck.log" | tee -a "$S"
  else
    say "compute-sanitizer: not on PATH"
  fi
fi
mem_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1; }
# LABEL PREDICTION ENV... -- COMMAND ARGS...: runs a clover command, GPU memory peak sampled every 0.2 s
go() {
  local label=$1 pred=$2; shift 2
  local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local base; base=$(mem_used); local peak=${base:-0} log="$O/$label.log" s; s=$(date +%s)
  env ${envs[@]+"${envs[@]}"} timeout 200 "$D/bin/clover" "$@" > "$log" 2>&1 &
  local pid=$!
  while kill -0 $pid 2>/dev/null; do
    local m; m=$(mem_used); [ -n "$m" ] && [ "$m" -gt "$peak" ] && peak=$m; sleep 0.2
  done
  wait $pid; local rc=$?
  say "== $label rc=$rc $(( $(date +%s) - s ))s, GPU peak $peak MiB (+$(( peak - ${base:-0} )) MiB)   [$pred]"
  [ $rc = 0 ] || tail -2 "$log" | tee -a "$S"
}
bench_lines() { # LOG: the bench table's rows, the cache lines, and the pool's stats lines
  grep -E "^(prompt|decode|preview|commit)|expert cache|^gpu-mem|^block diffusion" "$1" | tee -a "$S"
}
IDS=$(seq -s, 1000 1027)
ids_md5() { grep -E "^ids:" "$1" | md5sum | cut -c1-8; }
if has b; then
  wait; say "synth done $(date -u +%T) ($(el)s) $(ls -l $F 2>/dev/null | awk '{print $5}') bytes"
  go gate "no CLOVER_CUDA_GPU_MEM=1: exit 1, one line 'not yet verified on a device'" -- \
    run -m $F --ids $IDS --ar --max-tokens 4 --device cuda --gpu-mem 8
  export CLOVER_CUDA_GPU_MEM=1 # the cache's switch (unverified until this run) for every later line
  go bench-all "all-device: prompt ~5,000 tok/s, decode ~200 tok/s, ~22 GB" -- \
    bench -m $F -b 512 --device cuda
  bench_lines "$O/bench-all.log"
  go bench-16 "prompt 650-1,000 tok/s (cold); decode ~95 tok/s (70-130), hit 65-85%; 35-50 GB/s; pool ~12.5 GiB" \
    CLOVER_GPU_MEM_STATS=1 -- bench -m $F -b 512 --device cuda --gpu-mem 16
  bench_lines "$O/bench-16.log"
  go bench-8 "prompt 650-1,000 tok/s (cold); decode ~60 tok/s (40-80), hit 25-50%; 35-50 GB/s; pool ~4.5 GiB; peak 8,000-8,900 MiB" \
    CLOVER_GPU_MEM_STATS=1 -- bench -m $F -b 512 --device cuda --gpu-mem 8
  bench_lines "$O/bench-8.log"
  go bench-8-lfu "LFU: decode hit rate +0-5 points over bench-8's" \
    CLOVER_GPU_MEM_STATS=1 CLOVER_GPU_MEM_POLICY=lfu -- bench -m $F -b 512 --device cuda --gpu-mem 8
  bench_lines "$O/bench-8-lfu.log"
  go bench-8-staging "staging copies: 5-12 GB/s, decode 20-45 tok/s" \
    CLOVER_GPU_MEM_STATS=1 CLOVER_GPU_MEM_STAGING=1 -- bench -m $F -b 512 --device cuda --gpu-mem 8 --decode-tokens 16 --blocks 1
  bench_lines "$O/bench-8-staging.log"
  go gm2 "exit 1, one line: the dense weights alone need ~2.5 GiB" -- \
    run -m $F --ids $IDS --ar --max-tokens 4 --device cuda --gpu-mem 2
  A=(run -m $F --ids $IDS -c 2048 -b 512 --ignore-eos --device cuda) # one chunk size for all (the same bits)
  go ar-all "all-device --ar 64 tokens" -- "${A[@]}" --ar --max-tokens 64
  go ar-8 "--ar at 8 GiB: the same ids" -- "${A[@]}" --ar --max-tokens 64 --gpu-mem 8
  go ar-16 "--ar at 16 GiB: the same ids" -- "${A[@]}" --ar --max-tokens 64 --gpu-mem 16
  say "--ar ids md5: all-device $(ids_md5 "$O/ar-all.log"), 8 GiB $(ids_md5 "$O/ar-8.log"), 16 GiB $(ids_md5 "$O/ar-16.log")   [predicted all three equal]"
  grep -hE "^rate|expert cache" "$O/ar-8.log" "$O/ar-16.log" | tee -a "$S"
  go bd-all "all-device block diffusion 64 tokens" -- "${A[@]}" --max-tokens 64
  go bd-8 "block diffusion at 8 GiB: the same ids" -- "${A[@]}" --max-tokens 64 --gpu-mem 8
  say "block-diffusion ids md5: all-device $(ids_md5 "$O/bd-all.log"), 8 GiB $(ids_md5 "$O/bd-8.log")   [predicted equal]"
  grep -hE "^rate|expert cache" "$O/bd-8.log" | tee -a "$S"
  if [ "$(el)" -lt 420 ]; then # clover check: the device against the CPU per layer, all-device and at 8 GiB
    go check-all "all-device vs CPU: ok" -- check --device cuda -m $F --blocks 2
    go check-8 "--gpu-mem 8 vs CPU: the same errors, line for line" -- check --device cuda -m $F --blocks 2 --gpu-mem 8
    if diff <(grep -v "^device" "$O/check-all.log") <(grep -v "^device" "$O/check-8.log") > "$O/check.diff"; then
      say "clover check: the --gpu-mem 8 errors equal the all-device ones   [predicted equal]"
    else
      say "clover check: the errors differ ($(wc -l < "$O/check.diff") diff lines)   [predicted equal]"
      head -6 "$O/check.diff" | tee -a "$S"
    fi
  fi
fi
say "end $(date -u +%T) ($(el)s)"
(cd "$O" && tar czf "$R/logs.tgz" .)
