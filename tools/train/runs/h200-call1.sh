#!/bin/bash
# issue 16, device call 1: grouped-MoE check, eager bf16 training + eval, compile trial.
set -o pipefail
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
L=$OUT/log
nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv 2>&1 | tee $L
timeout 60 python3 tools/train/check_cuda.py 2>&1 | tee -a $L || { echo "grouped MoE failed its check: loop MoE" | tee -a $L; export CLOVER_TRAIN_LOOP_MOE=1; }
mkdir -p $OUT/ckpt
T="--corpus data/corpus --tok data/tok --bf16 --steps 2000 --causal-steps 500 --ramp 600 --log-every 10"
timeout 140 python3 tools/train/train.py $T --ckpt $OUT/ckpt --stop-after-min 1.25 --eval-prompts 20 2>&1 | tee -a $L
echo "=== compile trial" | tee -a $L
timeout 75 python3 tools/train/train.py $T --ckpt /tmp/ckc --compile --causal-steps 0 --max-steps-run 30 --eval-prompts 0 --save-every-s 1e9 2>&1 | grep -v "^  " | tail -30 | tee -a $L
nvidia-smi --query-gpu=memory.used --format=csv | tee -a $L
