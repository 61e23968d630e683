#!/usr/bin/env bash
# 2026-12-04 (issue 24, decode step): three changes to the small kernels of a decode step, none run before this
# script, each with a switch back to the old path for A/B in one binary:
#  - GDN recurrence with S in registers (src/cuda/gdn_recurrent.cu gdn_rec_reg_kernel; CLOVER_CUDA_GDN_REC=smem = old)
#  - the shared expert on a side stream beside router + routed experts (backend_cuda_pass.c shexp_on_side;
#    CLOVER_CUDA_SHEXP_SIDE=0 = old)
#  - attention's decode form (src/cuda/attention_forward.cu, helper att24; CLOVER_CUDA_ATTN_DECODE=0 = old)
#   cmake --build build -j2 && scripts/device-packs.sh build dec24
#   run(command="bash .gpu-dec24/run.sh", carry=[".gpu-dec24"], timeout_s=600)
# STEPS (default "t m d n a r"; h, s on request):
#  t  test_cuda_gdn / attention (new and old paths), the backend's CUDA tests (new paths; backend also old)
#  m  memcheck of test_cuda_gdn and test_cuda_attention (CLOVER_TEST_SMALL)
#  d  bench_cuda_decode ops at 1 row new / old; the backend's step on the 35B-A3B AR file: new, side off, all old
#  n  ncu of gdn_rec_reg_kernel vs gdn_rec_smem_kernel, the attention kernels (ops bench, 1 row)
#  a  bench_batch AR N=1,2,4,8,16 new vs old
#  r  clover run --ar 64 tokens: ids new vs old
# Call 2 (15:26 UTC, pack 00d7926, no attention change yet): bench/device-runs/2026-12-12-dec24/RESULTS.md.
# Call 7 (next session), also STEPS "s": ncu source counters of the head's one-row product (mmvs_kernel), its
#   SASS page as head-sass.csv in $OUT, to count the instructions a weight byte of the dp4a dot.
# Call 7 (next session): STEPS="t d a" STEP_CONFIGS="new: exact:CLOVER_CUDA_EXACT_ROWS=1" and the backend tests with
#   CLOVER_CUDA_EXACT_ROWS=1 (tst ... CLOVER_CUDA_EXACT_ROWS=1): the router of >8-row passes in one cuda_matmul_exact
#   launch. Predicted: 16 stacked sequences 11.6 -> ~10.8 ms (router 28 -> ~6 us a layer); bench_batch N=16 pass
#   16.0 -> ~15.2 ms; tests pass with it (the same bits by cuda_matmul_exact's contract, test_exact).
# Call 5: STEPS="t d a r" STEP_CONFIGS with pfoff (CLOVER_CUDA_L2_PREFETCH=0): the L2 prefetch of the next products
# Call 4: STEPS="t d n h a" NCU_KERNELS="gdn_rec_reg_kernel:new" (GDN FULL form; h = ncu of the head's decode product)
# Call 3 (pack with att24 merged and the GDN kernel's k/q staged in shared memory): predictions in RESULTS.md.
# Predictions (before call 2; "before" = 2026-12-10-moe1 out, H200):
#  - t: every test passes on both paths (GDN: the CPU oracle's bound; bits change with the sum order, not the
#    tests' verdicts). Risk: the state loaded before the PDL wait (safe by the argument in gdn_recurrent.cu).
#  - m: 0 errors.
#  - d ops: "gdn mix: conv + recurrent step + gated norm" 15.2 -> ~5 us (conv ~2 + ~3); x30 0.457 -> ~0.15 ms.
#    attention: the helper's prediction (att24's report in the session note).
#  - d step (lone pass in our graph, PDL on): 3.79 -> ~3.1 ms (GDN -0.3, shexp beside the experts -0.2..-0.3,
#    attention -0.1..-0.2); seq_commit ~3.1-3.2 ms (~315 tok/s); side off alone: ~3.35.
#    16 stacked sequences: 12.77 -> ~11.5 ms.
#  - n: gdn_rec_reg_kernel ~2-4 us (35B: 32 blocks of 512 threads, 111 registers), DRAM ~40-60% of its 4 MB;
#    the smem kernel ~12 us.
#  - a: N=1 pass 4.83 -> ~4.1 ms; N=16 16.75 -> ~15.
#  - r: ids equal new vs old except where a near-tie flips (GDN sum order): predicted equal on 64 tokens.
set -uo pipefail
PACK=${PACK:-.gpu-dec24}
STEPS=${STEPS:-t m d n a r}
. "$PACK/lib.sh"
dr_init dec24
unset CLOVER_CUDA_GDN_REC CLOVER_CUDA_SHEXP_SIDE CLOVER_CUDA_ATTN_DECODE CLOVER_CUDA_EXACT_ROWS
OLD="CLOVER_CUDA_GDN_REC=smem CLOVER_CUDA_SHEXP_SIDE=0 CLOVER_CUDA_ATTN_DECODE=0"
SPID=
if has d || has a || has r; then dr_synth35 --no-diffusion; fi
if has t; then
  tst test_cuda_gdn new 120
  grep -E "err|bound" "$O/t_test_cuda_gdn_new.log" | head -12 | tee -a "$S"
  tst test_cuda_gdn old 120 CLOVER_CUDA_GDN_REC=smem
  tst test_cuda_attention new 120
  grep -E "err|bound|decode" "$O/t_test_cuda_attention_new.log" | head -16 | tee -a "$S"
  tst test_cuda_attention old 120 CLOVER_CUDA_ATTN_DECODE=0
  tst test_cuda_ops new 60
  for n in test_cuda_backend test_cuda_batch test_cuda_engine test_cuda_preview test_cuda_split test_cuda_gpumem; do
    tst $n new 120
  done
  tst test_cuda_backend old 90 $OLD
  for n in test_cuda_batch test_cuda_preview test_cuda_engine; do tst $n exact 120 CLOVER_CUDA_EXACT_ROWS=1; done
fi
if has m; then
  if command -v compute-sanitizer > /dev/null; then
    for n in test_cuda_gdn test_cuda_attention; do
      s=$(date +%s)
      CLOVER_TEST_SMALL=1 timeout 120 compute-sanitizer --tool memcheck "$D/bin/$n" > "$O/memcheck_$n.log" 2>&1
      say "memcheck $n rc=$? $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY' "$O/memcheck_$n.log" | tail -1) (predicted 0 errors)"
      grep -m6 -E "Invalid|Error:|out of bounds|misaligned" "$O/memcheck_$n.log" | tee -a "$S"
    done
  else say "compute-sanitizer: not on PATH"; fi
fi
B=$D/bin/bench_cuda_decode
if has d; then
  for c in "new:" "old:$OLD"; do
    tag=${c%%:*} envs=${c#*:}
    env $envs CLOVER_BENCH_DECODE_ROWS=1 timeout 60 "$B" > "$O/ops_$tag.log" 2>&1
    say "== ops at 1 row, $tag${envs:+ ($envs)}: rc=$? at +$(el)s (predicted new: gdn mix 15.2 -> ~6 us; attn forward 512 tokens 22.7 -> ~5, max_kv 262144 31.9 -> ~5.5)"
    grep -E "gdn mix|gdn conv|attn|sums at|SUM|by kind" "$O/ops_$tag.log" | tee -a "$S"
  done
  wait $SPID; say "synth done at +$(el)s: $(tail -1 "$O/synth.log" 2>/dev/null)"
  env CLOVER_BENCH_DECODE_ROWS=16 timeout 60 "$B" > "$O/ops16_new.log" 2>&1
  say "== ops at 16 rows, new: rc=$? at +$(el)s"
  grep -E "gdn mix|attn forward|sums at|SUM|by kind" "$O/ops16_new.log" | tee -a "$S"
  for c in ${STEP_CONFIGS:-"new:" "gdnold:CLOVER_CUDA_GDN_REC=smem" "attnold:CLOVER_CUDA_ATTN_DECODE=0" "old:$OLD"}; do
    tag=${c%%:*} envs=${c#*:}
    env $envs CLOVER_BENCH_DECODE_ROWS=0 timeout 90 "$B" $F > "$O/step_$tag.log" 2>&1
    say "== step, $tag${envs:+ ($envs)}: rc=$? at +$(el)s (call 2 figures: new 3.518, side off 3.747, old 3.786; predicted call 3 new ~3.15 ms)"
    grep -E "STEP" "$O/step_$tag.log" | tee -a "$S"
  done
fi
if has n && command -v ncu > /dev/null; then
  for k in ${NCU_KERNELS:-gdn_rec_reg_kernel:new gdn_rec_smem_kernel:old attn_dec_kernel:new attn_fwd_kernel:old attn_combine_kernel:new}; do
    kn=${k%%:*} tag=${k##*:}
    [ "$(el)" -lt 420 ] || { say "ncu: no time left for $k"; continue; }
    env $([ $tag = old ] && echo $OLD) CLOVER_BENCH_DECODE_ROWS=1 timeout 90 ncu --kernel-name-base demangled \
      -k "regex:$kn" -c 3 --section SpeedOfLight --section Occupancy --section LaunchStats \
      --section WarpStateStats "$B" > "$O/ncu_${kn}_$tag.log" 2>&1
    say "ncu $kn ($tag) rc=$?:"
    grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Grid Size|Block Size|Warp Cycles Per Issued" "$O/ncu_${kn}_$tag.log" | head -30 | tee -a "$S"
  done
fi
if has h && command -v ncu > /dev/null; then # the output head's one-row decode product (mmv_kernel), 54% of copy
  STALLS=$(for r in long_scoreboard short_scoreboard barrier wait mio_throttle lg_throttle math_pipe_throttle not_selected selected no_instruction; do printf "smsp__average_warps_issue_stalled_%s_per_issue_active.ratio," $r; done | sed "s/,$//")
  CLOVER_BENCH_QUICK=1 CLOVER_BENCH_MMAROWS=1 CLOVER_BENCH_MMAROWS_ONLY=head CLOVER_BENCH_MMAROWS_ROWS=1 timeout 90 ncu \
    --kernel-name-base demangled -k "regex:mmv" -c 1 --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis --metrics "$STALLS" "$D/bin/bench_cuda_matmul" > "$O/ncu_head.log" 2>&1
  say "ncu head decode (mmv) rc=$?:"
  grep -E "mmv|Duration|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Grid Size|Block Size|Warp Cycles Per Issued|Dynamic Shared|L2 Hit|Mem Busy|Max Bandwidth" "$O/ncu_head.log" | head -20 | tee -a "$S"
  grep -E "issue_stalled" "$O/ncu_head.log" | awk '{print $1, $NF}' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | sort -k2 -g -r | head -6 | tr '\n' ';' | sed 's/^/   stalls: /' | tee -a "$S"; echo | tee -a "$S"
fi
if has s && command -v ncu > /dev/null; then # where the one-row dense dot spends its issue slots (head, mmvs_kernel)
  CLOVER_BENCH_QUICK=1 CLOVER_BENCH_MMAROWS=1 CLOVER_BENCH_MMAROWS_ONLY=head CLOVER_BENCH_MMAROWS_ROWS=1 timeout 120 ncu \
    --kernel-name-base demangled -k "regex:mmvs" -c 1 --section SourceCounters --section InstructionStats \
    --section WarpStateStats --import-source no -o /tmp/head-src -f "$D/bin/bench_cuda_matmul" > "$O/ncu_head_src.log" 2>&1
  say "ncu head source counters rc=$?"
  grep -E "Executed Instructions|Issued Instructions|Branch Instructions|Warp Cycles Per Issued" "$O/ncu_head_src.log" | head -6 | tee -a "$S"
  # the SASS with its per-instruction counts and stall samples: the hot loop's instruction mix, for the next kernel
  timeout 60 ncu --import /tmp/head-src.ncu-rep --page source --print-source sass --csv > "$R/head-sass.csv" 2> "$O/ncu_sass.err"
  say "sass page rc=$? $(wc -l < "$R/head-sass.csv") lines (head-sass.csv)"
fi
if has a; then
  wait $SPID
  for c in "new:" "old:$OLD"; do
    tag=${c%%:*} envs=${c#*:}
    left=$(( 540 - $(el) )); [ $left -lt 30 ] && { say "no time left for bench_batch $tag"; break; }
    env $envs timeout $left "$D/bin/bench_batch" $F --device cuda --mode ar --n 1,2,4,8,16 --prompt 32 --gen 64 \
      > "$O/batch_$tag.log" 2>&1
    say "== bench_batch AR ($tag${envs:+: $envs}) rc=$? at +$(el)s (before: N=1 4.83 ms, 2 5.84, 4 8.84, 8 11.35, 16 16.75)"
    grep -A8 "^autoregressive" "$O/batch_$tag.log" | head -9 | tee -a "$S"
  done
fi
if has r; then
  wait $SPID
  IDS=$(seq -s, 11 30)
  for c in "new:" "pfoff:CLOVER_CUDA_L2_PREFETCH=0" "old:$OLD"; do
    tag=${c%%:*} envs=${c#*:}
    [ "$(el)" -lt 560 ] || { say "no time left for clover run $tag"; continue; }
    env $envs timeout 40 "$D/bin/clover" run -m $F --device cuda --ids $IDS -n 64 --ignore-eos --no-visual --ar \
      > "$O/run_$tag.txt" 2> "$O/run_$tag.err"; echo "rc=$?" >> "$O/run_$tag.err"
  done
  a=$(grep "^ids:" "$O/run_new.txt" 2>/dev/null); b=$(grep "^ids:" "$O/run_old.txt" 2>/dev/null)
  if [ -n "$a" ] && [ "$a" = "$b" ]; then say "clover run --ar: new and old give the same ids ($(echo $a | wc -w) words)"
  else say "clover run --ar: DIFFER or failed: $(tail -2 "$O/run_new.err" | tr '\n' ' ') / $(tail -2 "$O/run_old.err" | tr '\n' ' ')"; fi
  c=$(grep "^ids:" "$O/run_pfoff.txt" 2>/dev/null)
  if [ -n "$a" ] && [ "$a" = "$c" ]; then say "clover run --ar: the L2 prefetch on and off give the same ids (predicted: always)"
  else say "clover run --ar: prefetch on / off DIFFER or failed (a hint must not change bits)"; fi
  grep -hE "^time|tok/s" "$O/run_new.txt" "$O/run_new.err" "$O/run_old.txt" "$O/run_old.err" 2>/dev/null | head -6 | tee -a "$S"
fi
dr_end
