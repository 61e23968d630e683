#!/usr/bin/env bash
# Session 2026-12-03 (third), device call 1: the k3 pack (issue 24: coreset a warp per row, GDN block in two
# launches) then the serve25 pack (issue 25: logits kept on the device, grouped picks, one pinned set).
#   run(command="bash bench/device-runs/2026-12-05-verify/call1.sh", carry=[".gpu-k3",".gpu-serve25"], timeout_s=600)
# Predictions: in each pack's run.sh header (bench/device-runs/2026-12-05-k3/run.sh, -serve25/run.sh).
set -uo pipefail
R=${OUT:-/tmp/out}
OUT=$R/k3 timeout 290 bash .gpu-k3/run.sh
OUT=$R/serve25 timeout 290 bash .gpu-serve25/run.sh
