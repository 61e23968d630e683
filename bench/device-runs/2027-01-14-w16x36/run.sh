#!/usr/bin/env bash
# Written in the session of 2026-12-07 09:57 UTC (issues 24 and 25), from opmix34's step w: the 512-row passes'
# wide kernels run at 12.5% occupancy (igw_q8_kernel 196 registers, igw_k_kernel 206: one 8-warp block an SM, 2 warps
# a scheduler, 3.4-3.7 cycles an issue, stall "wait" the largest): their 16-warp forms (CLOVER_CUDA_IGW_W16=1,
# matmul_igemm_wide.cu): Q8_0 two warps a partial (128 registers, 64 accumulators a thread), K-quants 8 x 2 warps
# with one m-tile each (120 registers); the same tile, the same operations in the same order (same bits).
# Also: main's review mends (4e0db1d: the fused expert sum's cmb_add / cmb_gate, verified by PTX only) on a GPU, the
# tail of test_cuda_matmul not run against the fused sum, and k2mins35's AR A/B (its pack in .gpu-k2m, carried).
#   run(command="SEQ_LIMIT=580 ITEMS='w16x36:t,w,k' OUT=$OUT/seq1 bash .gpu-seq/run.sh", carry=[".gpu-seq", ".gpu-k2m"])
# STEPS:
#  t  test_cuda_ops (test_combine_norm: the fused sum's bits), test_cuda_matmul in parts: a (test_igemm_wide: both
#     warp forms bit for bit against the 16x32 kernels), b (test_moe_igw: both forms against matmul_igemm.cu), d (its
#     tail: test_glu .. test_norm_q8); test_cuda_preview, test_cuda_batch; memcheck of test_igemm_wide and
#     test_moe_igw (SMALL, W16 on); clover run ids with W16 off and on (db3c58da3157 / ff19558da508)
#  w  CLOVER_BENCH_LAYER=1 bench_cuda_matmul (the 512-row lines, WIDE and WIDE w16), then W16 0 / 1 alternating
#     twice: bench_batch --mode diffusion --n 16 and bench_cuda_backend --prompt-only 1; ncu of the first igw_q8 and
#     igw_k launch of a stacked diffusion run with W16=1 (occupancy, cycles an issue, instructions)
#  k  bench_batch --mode ar --n 16, main / k2mins alternating 3 rounds, bench_cuda_preview beside (k2mins35's A/B),
#     both with CLOVER_CUDA_IGW_W16=0 (the k2mins pack is of fa50c08, where the switch was off by default)
#  (added after seq1, with W16 made the default, 1 = both kernels, 2 / 3 = the Q8_0 / K-quant kernel alone)
#     and in igw_k_kernel a warp whose rows are all past its tile's (a grouped tile of <= 32 slots: a stacked pass's
#     experts get ~16 slots each) skips the chunk's decoding (it decoded every weight fragment for no mma)
#  u  test_cuda_matmul b (test_moe_igw with a case of ~24 slots an expert, both warp forms) + memcheck of it
#  s  W16 0 / 1 / 2 / 3, two rounds: bench_cuda_backend --prompt-only 1 and bench_batch --mode diffusion --n 16;
#     beside them the .gpu-k2m pack (fa50c08: no skip) at W16=1, the before of the skip
#  v  serve 16 x 128 AR (the --no-diffusion file) and 16 x 64 diffusion at the new defaults (issue 25's ratios)
#  x  the stacked 16-sequence diffusion pass's kernel table at the new defaults (the tracer, PDL off), for the next
#     step of issue 25: predicted igw_q8 ~28% and igw_k ~18-20% (was ~25%) of it
# Predictions (before the run; H100):
#  t  all pass; ids equal with W16 off and on.
#  w  igw_q8 at 4 warps a scheduler: ~37 instructions an IMMA (the A fragments decoded by two warps), cycles an
#     issue per scheduler 1.9 -> ~1.2: the 512-row qkv WIDE line 1.3-1.5x faster; igw_k (rows decoded twice as
#     often, ~37 an IMMA) 1.2-1.4x; the stacked diffusion pass (igw_q8 ~28%, igw_k ~25% of it) +10-15% agg tok/s
#     (~305 -> ~340); prompt 512 +8-12%. ncu: achieved occupancy ~25%, registers 128 / 120.
#  k  AR n 16 main vs k2mins within +-2% (the one earlier sample -2.6%); coreset preview k2mins -0.03..-0.05 ms.
#  (seq2, written after seq1's figures) s  prompt: 2 (Q8_0 alone) takes most of 1's +5%, 3 (K alone) +0..+2%;
#     the skip: igw_k in the stacked pass -20..-30% (about half its warps decoded for nothing), so bench_batch
#     diffusion n 16 +5..+7% over the old pack at W16=1 (~290 -> ~308 agg tok/s), prompt 512 +3..+5% (a 512-row
#     chunk also routes ~16 slots an expert). v  serve AR ~5.4x (unchanged: 16-row steps take no
#     wide kernel), diffusion ~1.9-1.95x (was 1.89x).
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t w}
. "$PACK/lib.sh"
dr_init w16x36
dr_synth35
A="test_bad_arguments,test_act_quantize_bytes,test_decode_types,test_chunk_types,test_chunk_thin,test_exact,test_exact_multi,test_chunk_multi,test_chunk_seg,test_row_invariance,test_few_rows,test_mma_rows,test_igemm_wide,test_q8_rows32,test_mmv_stream,test_mmv_lane,test_stream32"
B="test_moe_decode,test_moe_chunk,test_moe_igw,test_moe_persist,test_moe_tall,test_moe_many_experts,test_moe_dec32"
DD="test_glu,test_glu_quant,test_multi,test_graph_capture,test_pdl_rows,test_pdl_rows_passes,test_norm_q8"
if has t; then
  tst test_cuda_ops all 100
  tst test_cuda_matmul a 150 CLOVER_TEST_ONLY=$A
  tst test_cuda_matmul b 150 CLOVER_TEST_ONLY=$B
  tst test_cuda_matmul d 120 CLOVER_TEST_ONLY=$DD
  tst test_cuda_preview all 100
  tst test_cuda_batch all 100
  CLOVER_CUDA_IGW_W16=1 CLOVER_TEST_SMALL=1 dr_memcheck test_cuda_matmul test_igemm_wide,test_moe_igw 150
  wait $SPID
  dr_run_ids w16off CLOVER_CUDA_IGW_W16=0
  dr_run_ids w16on CLOVER_CUDA_IGW_W16=1
fi
if has w; then
  wait $SPID
  CLOVER_BENCH_LAYER=1 timeout 120 "$D/bin/bench_cuda_matmul" > "$O/layer.log" 2>&1
  say "== bench_cuda_matmul LAYER rc=$? at +$(el)s"
  grep -E "at 512 rows" "$O/layer.log" | cut -c1-170 | tee -a "$S"
  for r in 1 2; do
    for v in 0 1; do
      [ "$(el)" -lt "${DR_LIMIT:-585}" ] || break
      CLOVER_CUDA_IGW_W16=$v timeout 90 "$D/bin/bench_batch" $F --device cuda --mode diffusion --n 16 --prompt 32 \
        --gen 64 > "$O/bd_${v}_$r.log" 2>&1
      say "b rc=$? diffusion n 16 W16=$v: $(grep -E '^ +16 ' "$O/bd_${v}_$r.log" | tail -1 | cut -c1-110)"
      CLOVER_CUDA_IGW_W16=$v timeout 90 "$D/bin/bench_cuda_backend" $F --prompt-only 1 > "$O/pp_${v}_$r.log" 2>&1
      say "   W16=$v prompt: $(grep -E '^prompt of 512|^32-row chunk commit' "$O/pp_${v}_$r.log" | cut -c1-60 | tr -s ' ' | tr '\n' ';')"
    done
  done
  if command -v ncu > /dev/null; then
    nb() { # TAG KERNEL: the first launch in a 16-sequence stacked diffusion run, W16 on
      CLOVER_CUDA_IGW_W16=1 timeout 120 ncu -k "regex:$2" -c 1 --section InstructionStats --section WarpStateStats \
        --section LaunchStats --section Occupancy --section SpeedOfLight -f -o "$O/$1" "$D/bin/bench_batch" $F \
        --device cuda --mode diffusion --n 16 --prompt 32 --gen 32 > "$O/ncu_$1.log" 2>&1
      say "== ncu $1 ($2) rc=$? at +$(el)s"
      ncu --import "$O/$1.ncu-rep" --page details --print-details all > "$O/$1_details.txt" 2>&1
      grep -E "Duration|Warp Cycles Per Issued|Executed Instructions  |Registers Per|Achieved Occupancy|DRAM Throughput|Issue Slots Busy" \
        "$O/$1_details.txt" | head -14 | sed 's/  */ /g' | tee -a "$S"
      gzip -c "$O/$1_details.txt" > "$R/$1_details.txt.gz"
    }
    nb igwq8_w16 igw_q8_kernel
    nb igwk_w16 igw_k_kernel
  fi
fi
if has k; then
  wait $SPID
  K=/tmp/k2m; rm -rf $K; mkdir -p $K
  if tar xJf .gpu-k2m/pack.txz -C $K; then
    say "k2mins pack $(cat .gpu-k2m/COMMIT) in $K"
    for r in 1 2 3; do
      for v in main k2m; do
        [ "$(el)" -lt "${DR_LIMIT:-585}" ] || break
        bin=$D/bin; [ $v = k2m ] && bin=$K/bin
        CLOVER_CUDA_IGW_W16=0 LD_LIBRARY_PATH=${bin%/bin}/lib timeout 90 "$bin/bench_batch" $F --device cuda --mode ar --n 16 --prompt 32 \
          --gen 64 > "$O/ka_${v}_$r.log" 2>&1
        say "k rc=$? ar n 16 $v: $(grep -E '^ +16 ' "$O/ka_${v}_$r.log" | tail -1 | cut -c1-110)"
        CLOVER_CUDA_IGW_W16=0 LD_LIBRARY_PATH=${bin%/bin}/lib timeout 60 "$bin/bench_cuda_preview" $F --reps 3 > "$O/kp_${v}_$r.log" 2>&1
        say "   $v preview: $(grep -E '^(preview 32 rows, first|commit)' "$O/kp_${v}_$r.log" | awk '{for (i = 2; i <= NF; i++) if ($i == "ms") { printf "%s ", $(i - 1); break }}')"
      done
    done
  else say "k: no .gpu-k2m pack"; fi
fi
if has u; then
  tst test_cuda_matmul b 150 CLOVER_TEST_ONLY=$B
  CLOVER_TEST_SMALL=1 dr_memcheck test_cuda_matmul test_moe_igw 150
fi
if has s; then
  wait $SPID
  K=/tmp/k2m
  [ -x $K/bin/bench_batch ] || { rm -rf $K; mkdir -p $K; tar xJf .gpu-k2m/pack.txz -C $K; }
  for r in 1 2; do
    LD_LIBRARY_PATH=$K/lib CLOVER_CUDA_IGW_W16=1 timeout 90 "$K/bin/bench_batch" $F --device cuda --mode diffusion \
      --n 16 --prompt 32 --gen 64 > "$O/so_$r.log" 2>&1
    say "s rc=$? OLD pack (no skip) W16=1 diffusion n 16: $(grep -E '^ +16 ' "$O/so_$r.log" | tail -1 | cut -c1-110)"
    for v in 0 1 2 3; do
      [ "$(el)" -lt "${DR_LIMIT:-585}" ] || break
      CLOVER_CUDA_IGW_W16=$v timeout 90 "$D/bin/bench_cuda_backend" $F --prompt-only 1 > "$O/sp_${v}_$r.log" 2>&1
      say "s W16=$v prompt: $(grep -E '^prompt of 512|^32-row chunk commit' "$O/sp_${v}_$r.log" | cut -c1-60 | tr -s ' ' | tr '\n' ';')"
      CLOVER_CUDA_IGW_W16=$v timeout 90 "$D/bin/bench_batch" $F --device cuda --mode diffusion --n 16 --prompt 32 \
        --gen 64 > "$O/sd_${v}_$r.log" 2>&1
      say "   rc=$? diffusion n 16 W16=$v: $(grep -E '^ +16 ' "$O/sd_${v}_$r.log" | tail -1 | cut -c1-110)"
    done
  done
fi
if has x; then
  wait $SPID
  CLOVER_CUDA_PDL=0 CLOVER_TRACE_OUT=$O/trace_d16.txt LD_PRELOAD=$D/bin/libclover_kernel_trace.so timeout 200 \
    "$D/bin/bench_batch" $F --device cuda --mode diffusion --prompt 32 --gen 64 --n 16 > "$O/dbatch_trace.log" 2>&1
  say "== bench_batch --mode diffusion --n 16 under the tracer (PDL off) rc=$? at +$(el)s"
  if [ -f $O/trace_d16.txt ]; then
    c++filt < $O/trace_d16.txt > $O/trace_d16.dm.txt && rm -f $O/trace_d16.txt
    grep -E "^== window 0:" $O/trace_d16.dm.txt | head -1 | tee -a "$S"
    awk '$0 ~ "^== window 0:" {f++; next} /^== window/{if (f) exit} f == 1' $O/trace_d16.dm.txt | head -30 | \
      cut -c1-150 | tee -a "$S"
  fi
fi
if has v; then
  wait $SPID
  AR=/tmp/synth35-ar.gguf
  [ -s $AR ] || { timeout 150 "$D/bin/clover" synth --preset qwen3.5-35b-a3b --no-diffusion -o $AR.part \
    > "$O/synth-ar.log" 2>&1 && mv $AR.part $AR; }
  say "AR file at +$(el)s"
  dr_serve $AR "" 16 128 1 ar
  dr_serve $F "" 16 64 1 diffusion
fi
rm -f "$O"/*.ncu-rep # (MBs; the details pages are kept)
dr_end
