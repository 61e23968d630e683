#!/usr/bin/env bash
# Written in the session of 2026-12-07 07:33 UTC (issue 24): WHERE the instructions of the few-row products go,
# opcode by opcode and line by line, before anyone invests sessions in README item 56's device layout. prof26's ncu
# had the experts' WIDE pair 46% issue-active and the qkv/z/a product 64% (issue-bound); the estimate behind item
# 56 (~500 instructions a warp a Q4_K chunk for 8 IMMA, "the layout's fragment decode") was read from the source,
# never counted. Nothing here changes code: the pack of 84570fa as it is.
#   run(command="SEQ_LIMIT=300 ITEMS='opmix34:s,n' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"])
# STEPS:
#  s  cuobjdump -sass of igemm_kernel<Q4_K, PREQ, WIDE, K2, 0> (the experts' gate + up pair and down of a preview,
#     a commit and the stacked steps) and igemm_q8_kernel<0> (the 770-block qkv/z/a product), each's opcode
#     histogram in the summary, the SASS back gzipped
#  n  ncu SourceCounters + InstructionStats of the first launch of each in a coreset preview (range 5, eager), and of
#     the pair in a block commit (range 4): executed instructions per SASS line (--page source --print-source sass,
#     gzipped CSV back), the details page (issue %, stalls) in the summary
#  w  (added after seq1) ncu SourceCounters of the first 512-row dense Q8_0 product (igw_q8_kernel) and the first
#     grouped-expert launch on igw_k_kernel of a 16-sequence stacked diffusion run (bench_batch --mode diffusion --n
#     16): the same per-line counts, for the 512-row passes of issue 25
# Predictions (before the run): in the pair's super-block loop, the copy issue (cp.async + address + range checks)
# and the fragment / scale unpacking together > 50% of the executed instructions, IMMA < 5%; in igemm_q8_kernel<0>
# the 2-byte A-fragment loads and merges (PRMT / LDS.U16) > 30%.
# w (written after seq1's reading): igw_q8_kernel per IMMA ~15-25 instructions (its 64-row tiles reuse each
# fragment over more IMMA), of them the Q8_0 block terms (I2FP + FMUL + FADD / FFMA, ~12 an IMMA for 4 sums a lane)
# over half; issue-bound (the product at 512 rows ~5x its int8 tensor-core time).
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-s n}
. "$PACK/lib.sh"
dr_init opmix34
dr_synth35
PAIR=_Z12igemm_kernelILi12ELb1ELb1ELb1ELi0EEv9ig_params
QKV=_Z15igemm_q8_kernelILi0EEv9ig_params
hist() { # SASS file -> opcode histogram (top 40) into the summary
  grep -oE '^\s+/\*[0-9a-f]{4,}\*/\s+[@!A-Z0-9_.P ]*' "$1" | sed -E 's#^\s+/\*[0-9a-f]+\*/\s+##; s/^@!?U?P[0-9T]+ +//' | \
    awk '{split($1, a, "."); print a[1]}' | sort | uniq -c | sort -rn | head -40 | tr '\n' ' ' | tee -a "$S"; echo | tee -a "$S"
}
if has s; then
  if command -v cuobjdump > /dev/null; then
    for f in $PAIR $QKV; do
      cuobjdump -sass -fun "$f" "$D/bin/bench_cuda_preview" > "$O/sass_$f.txt" 2> "$O/sass_$f.err"
      say "== cuobjdump $f rc=$? lines $(wc -l < "$O/sass_$f.txt")"
      hist "$O/sass_$f.txt"
      gzip -c "$O/sass_$f.txt" > "$R/sass_$f.txt.gz"
    done
  else say "s: no cuobjdump"; fi
fi
if has n && command -v ncu > /dev/null; then
  wait $SPID
  np() { # TAG RANGE KERNEL
    CLOVER_BENCH_PROFILE_ONLY=$2 timeout 150 ncu --profile-from-start off -k "regex:^$3\$" -c 1 \
      --section SourceCounters --section InstructionStats --section WarpStateStats --section LaunchStats \
      --section Occupancy --section SpeedOfLight -f -o "$O/$1" "$D/bin/bench_cuda_preview" $F --profile \
      > "$O/ncu_$1.log" 2>&1
    say "== ncu $1 (range $2, $3) rc=$? at +$(el)s"
    ncu --import "$O/$1.ncu-rep" --page details --print-details all > "$O/$1_details.txt" 2>&1
    grep -E "Duration|Executed Ipc|Issue Slots|Executed Instructions|Registers|Achieved Occupancy|Stall|Theoretical Occ|Warp Cycles" \
      "$O/$1_details.txt" | head -30 | sed 's/  */ /g' | tee -a "$S"
    ncu --import "$O/$1.ncu-rep" --page source --csv --print-source sass > "$O/$1_source.csv" 2> "$O/$1_source.err"
    say "   source page rc=$? $(wc -l < "$O/$1_source.csv") lines"
    gzip -c "$O/$1_source.csv" > "$R/$1_source.csv.gz"
    gzip -c "$O/$1_details.txt" > "$R/$1_details.txt.gz"
  }
  np pair_preview 5 igemm_kernel
  np qkv_preview 5 igemm_q8_kernel
  np pair_commit 4 igemm_kernel
fi
if has w && command -v ncu > /dev/null; then
  wait $SPID
  nb() { # TAG KERNEL: the first launch in a 16-sequence stacked diffusion run
    timeout 200 ncu -k "regex:$2" -c 1 --section SourceCounters --section InstructionStats --section WarpStateStats \
      --section LaunchStats --section Occupancy --section SpeedOfLight -f -o "$O/$1" "$D/bin/bench_batch" $F \
      --device cuda --mode diffusion --n 16 --prompt 32 --gen 32 > "$O/ncu_$1.log" 2>&1
    say "== ncu $1 ($2) rc=$? at +$(el)s"
    ncu --import "$O/$1.ncu-rep" --page details --print-details all > "$O/$1_details.txt" 2>&1
    grep -E "Duration|Warp Cycles Per Issued|Executed Instructions  |Registers Per|Achieved Occupancy|DRAM Throughput" \
      "$O/$1_details.txt" | head -12 | sed 's/  */ /g' | tee -a "$S"
    ncu --import "$O/$1.ncu-rep" --page source --csv --print-source sass > "$O/$1_source.csv" 2> "$O/$1_source.err"
    say "   source page rc=$? $(wc -l < "$O/$1_source.csv") lines"
    gzip -c "$O/$1_source.csv" > "$R/$1_source.csv.gz"
    gzip -c "$O/$1_details.txt" > "$R/$1_details.txt.gz"
  }
  nb igwq8_stack igw_q8_kernel
  nb igwk_stack igw_k_kernel
fi
dr_end
