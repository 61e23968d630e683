#!/usr/bin/env bash
# Written in the session of 2026-12-08 02:35 UTC (issue 24; no device was lent that session: written, not run).
# Whether the grouped experts' tile loop loses its last partial wave. wr45's tracer table (H100): the 16-row AR
# step's pair `4,99,2` 63.4 us and down `16,50,1` 30.8 us a layer (42% of the step). grid.y is ~2 waves of blocks
# (ig_tile_rows: 3 blocks an SM x 132 SMs x 2 / 8 blocks a tile = 99 for the pair), while a 16-row step routes to
# ~100-110 experts, so ~1-11 of the pair's block rows walk a second tile after the others have finished: a tail of
# a few lone blocks, each streaming its 147 KB at one block's latency-bound pace. If that tail is several us, the
# lever is the work's split (finer units at the end, or a grid sized to the step's tiles), not the kernel's loop.
#   run(command="SEQ_LIMIT=300 ITEMS='wave50:w' OUT=$OUT/seqN bash .gpu-seq/run.sh", carry=[".gpu-seq"])
#   (a pack of ec93c65's successor or later: bench_cuda_matmul with CLOVER_BENCH_TILES_SWEEP)
# STEPS:
#  w  bench_cuda_matmul CLOVER_BENCH_TILES_SWEEP=1: the pair and the down at exactly D = 64..128 experts (D tiles),
#     medians of 5; then the same at the cap forced to 128 (no loop: the hardware's block order) for D 99 / 100 / 128
# Predictions (before the run; H100): a staircase, not a line: the pair +3..+6 us from D 99 to 100 (against ~0.6 us
# a tile on average), flat within +-1 us from 100 to ~104; the down +1..+2 us from 100 to 101 (its 50-row grid's
# third tile). If instead each D adds ~t/D, the tail is not the cost and this lever is closed.
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-w}
. "$PACK/lib.sh"
dr_init wave50
if has w; then
  dr_mrun sweep 150 env CLOVER_BENCH_TILES_SWEEP=1 "$D/bin/bench_cuda_matmul"
  grep -E "^sweep|^copy|bandwidth" "$O/sweep.log" | cut -c1-150 | tee -a "$S"
  dr_mrun sweep_cap128 150 env CLOVER_BENCH_TILES_SWEEP=1 CLOVER_CUDA_MOE_TILE_CAP=128 "$D/bin/bench_cuda_matmul"
  grep -E "^sweep .* D +(99|100|128) " "$O/sweep_cap128.log" | cut -c1-150 | sed 's/^/cap128 /' | tee -a "$S"
fi
dr_end
