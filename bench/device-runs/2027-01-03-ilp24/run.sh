#!/usr/bin/env bash
# Written in the 2026-12-06 11:25 session (issues 24, 25): the integer chunk kernels' per-chunk sums branch-free
# where every row tile is live (e3c2b3c: igemm_tile's `on`, igemm_q8_kernel's all-live form, its launch bounds 3
# blocks an SM). xtile25's ncu of a commit's expert pair (igemm_kernel<12,1,1,1,0>) found a branch (`if (!live[i])`)
# between every two sub-blocks of a chunk: each sub-block its own basic block, LDS -> LOP3 -> IMMA -> IMAD in
# series, `wait` (27k) and short_scoreboard (15k) the top stalls of the chunk loop (77% of the samples).
# Before / after in ONE call: three packs, their binaries alternating on the same machine and model file:
# old = 585aa94 ($PACK_OLD, .gpu-old: before both), ilp = 723e69b ($PACK_ILP, .gpu-ilp: the branch-free sums), new =
# 400e2d4 ($PACK, .gpu-seq: also the grouped / PREQ tiles' first weights in flight before their slot list is read,
# ig_pieces' init_w / copy_w: a tile's fill overlapping its set-up, ~23% of the pair's samples in xtile25's ncu).
#   run(command="ITEMS='ilp24:t,b,a,p' OUT=$OUT/seqN bash .gpu-seq/run.sh",
#       carry=[".gpu-seq", ".gpu-ilp", ".gpu-old"])
# STEPS (default "t b a p"):
#  t  test_cuda_matmul in two parts (every integer kernel against the decode kernel bit for bit, row invariance,
#     grouped, X2, segmented), test_cuda_moe_tiles, test_cuda_preview, test_cuda_batch, test_cuda_backend; memcheck
#     of test_cuda_moe_tiles; clover run ids (2cdbf2f9ccaf / d1f13e945396: the same bits)
#  b  bench_cuda_preview --reps 3: old / ilp / new, twice (preview, commit, block diffusion)
#  a  bench_batch --mode ar --n 16 --prompt 32 --gen 96: old / ilp / new, twice (the 16-row stacked step, serve AR)
#  p  bench_cuda_backend --prompt-only 1: old / ilp / new (prompt 512: the wide kernels, unchanged; the 32-row commit)
#  k  bench_cuda_matmul CLOVER_BENCH_TILES=1 old / ilp / new (the grouped pair and down per routing shape)
# Predictions (before the run, H100): ids equal; the commit's experts (pair ~100 us + down ~67 a layer at DRAM
# 57% / 45%) -10..-25% -> commit 10.9 -> 9.8-10.4 ms; the 16-row step's experts likewise -> bench_batch ar n 16
# +5..+12%; the preview -1..-4% (its dense 32-row Q8_0 products' 4 tiles now overlap; 3 blocks an SM kept);
# prompt 512 within +-2% (its 512-row products take matmul_igemm_wide.cu). The early weights (new against ilp): the
# commit's pair -3..-8%, its down (2 chunks a tile: mostly fill) -5..-15%; commit -0.2..-0.5 ms; n 16 +2..+5%.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
PACK_OLD=${PACK_OLD:-.gpu-old}
PACK_ILP=${PACK_ILP:-.gpu-ilp}
STEPS=${STEPS:-t b a p}
. "$PACK/lib.sh"
dr_init ilp24
C=$D/bin/clover
DO=/tmp/ilp24-old DI=/tmp/ilp24-ilp; rm -rf "$DO" "$DI"; mkdir -p "$DO" "$DI"
tar xJf "$PACK_OLD/pack.txz" -C "$DO" || say "old pack: unpack failed"
tar xJf "$PACK_ILP/pack.txz" -C "$DI" || say "ilp pack: unpack failed"
say "old pack $(cat "$PACK_OLD/COMMIT" 2>/dev/null), ilp pack $(cat "$PACK_ILP/COMMIT" 2>/dev/null)"
dr_synth35
dir() { case $1 in old) echo "$DO" ;; ilp) echo "$DI" ;; *) echo "$D" ;; esac; }
bin() { echo "$(dir "$1")/bin/$2"; }
lib() { echo "$(dir "$1")/lib"; }
if has t; then
  tst test_cuda_matmul a 150 CLOVER_TEST_ONLY=test_bad_arguments,test_act_quantize_bytes,test_decode_types,test_chunk_types,test_chunk_thin,test_exact,test_exact_multi,test_chunk_multi,test_chunk_seg,test_row_invariance,test_few_rows,test_mma_rows,test_igemm_wide,test_q8_rows32,test_mmv_stream,test_mmv_lane,test_stream32
  tst test_cuda_matmul b 150 CLOVER_TEST_ONLY=test_moe_decode,test_moe_chunk,test_moe_igw,test_moe_persist,test_moe_many_experts,test_moe_dec32,test_glu,test_glu_quant,test_multi,test_graph_capture,test_pdl_rows
  for n in test_cuda_moe_tiles test_cuda_preview test_cuda_batch test_cuda_backend; do tst $n all 120; done
  if command -v compute-sanitizer > /dev/null; then
    s=$(date +%s)
    timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$D/bin/test_cuda_moe_tiles" \
      > "$O/memcheck_tiles.log" 2>&1
    say "memcheck test_cuda_moe_tiles rc=$? $(( $(date +%s) - s ))s: $(grep -E 'ERROR SUMMARY' "$O/memcheck_tiles.log" | tail -1)"
  fi
  wait $SPID
  timeout 60 "$C" run -m $F --device cuda --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual --json \
    > "$O/run.json" 2> "$O/run.err"
  timeout 60 "$C" run -m $F --device cuda --ar --ids $(seq -s, 11 40) -n 64 --ignore-eos --no-visual --json \
    > "$O/ar.json" 2> "$O/ar.err"
  say "clover run: diffusion $(dr_ids "$O/run.json"), --ar $(dr_ids "$O/ar.json")"
fi
if has b; then
  wait $SPID
  for v in old ilp new old ilp new; do
    [ "$(el)" -lt "${ILP_BBUDGET:-330}" ] || { say "bench_cuda_preview: no time left"; break; }
    LD_LIBRARY_PATH=$(lib $v) timeout 90 "$(bin $v bench_cuda_preview)" $F --reps 3 > "$O/preview_$v.log" 2>&1
    say "== bench_cuda_preview --reps 3 $v rc=$? at +$(el)s"
    grep -E "^(preview 32 rows, first|commit|block)" "$O/preview_$v.log" | cut -c1-110 | tee -a "$S"
  done
fi
if has a; then
  wait $SPID
  for v in old ilp new old ilp new; do
    [ "$(el)" -lt "${ILP_ABUDGET:-430}" ] || { say "bench_batch: no time left"; break; }
    LD_LIBRARY_PATH=$(lib $v) timeout 60 "$(bin $v bench_batch)" $F --device cuda --mode ar --n 16 --prompt 32 \
      --gen 96 > "$O/batch_$v.log" 2>&1
    say "== bench_batch --mode ar --n 16 $v rc=$? at +$(el)s: $(grep -E '^ +16 ' "$O/batch_$v.log" | tail -1)"
  done
fi
if has p; then
  wait $SPID
  for v in old ilp new; do
    [ "$(el)" -lt "${ILP_PBUDGET:-480}" ] || { say "prompt: no time left"; break; }
    LD_LIBRARY_PATH=$(lib $v) timeout 90 "$(bin $v bench_cuda_backend)" $F --prompt-only 1 > "$O/prompt_$v.log" 2>&1
    say "== bench_cuda_backend --prompt-only 1 $v rc=$? at +$(el)s"
    grep -E "prompt of 512|chunk commit" "$O/prompt_$v.log" | cut -c1-150 | tee -a "$S"
  done
fi
if has k; then
  for v in old ilp new; do
    [ "$(el)" -lt "${ILP_KBUDGET:-520}" ] || { say "tiles: no time left"; break; }
    LD_LIBRARY_PATH=$(lib $v) CLOVER_BENCH_TILES=1 timeout 90 "$(bin $v bench_cuda_matmul)" > "$O/tiles_$v.log" 2>&1
    say "== bench_cuda_matmul CLOVER_BENCH_TILES=1 $v rc=$? at +$(el)s"
    grep -E "^(tiles|moe)" "$O/tiles_$v.log" | cut -c1-170 | tee -a "$S"
  done
fi
dr_end
