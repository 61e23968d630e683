#!/bin/bash
# issue 16, device call 2: resume call 1's causal checkpoint, block-diffusion adaptation.
set -o pipefail
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
L=$OUT/log
nvidia-smi --query-gpu=name,memory.total --format=csv 2>&1 | tee $L
timeout 60 python3 tools/train/check_cuda.py 2>&1 | tee -a $L || { echo "grouped MoE failed its check: loop MoE" | tee -a $L; export CLOVER_TRAIN_LOOP_MOE=1; }
cp -r data/ckpt $OUT/ckpt
timeout 275 python3 tools/train/train.py --corpus data/corpus --tok data/tok --ckpt $OUT/ckpt --bf16 \
  --steps 1000 --causal-steps 317 --ramp 250 --warmup 30 --log-every 10 --eval-every 300 \
  --eval-prompts 20 --thresholds 0.9 0.6 0.3 --stop-after-min 3.95 --save-every-s 60 2>&1 | tee -a $L
ls -la $OUT/ckpt | tee -a $L
