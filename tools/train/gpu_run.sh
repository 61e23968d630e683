#!/bin/bash
# Issue 26: one command per GPU call, resumable (tools/train/PLAN.md has the plan).
#
#   bash tools/train/gpu_run.sh train    on the device, via the `run` tool with carry [".gpu-train"]:
#                                        resumes the fixed schedule below from .gpu-train/ckpt
#                                        (what take_back.sh or ckpt_git.sh restore put there; else step 0), trains until 540 s
#                                        after the call started, writes $OUT/ckpt (3 files <= 16 MiB,
#                                        8-bit weights) and $OUT/train.log
#   bash tools/train/gpu_run.sh check    on the device: the grouped-GEMM MoE against the loop, the
#                                        complementary-view forward against two plain ones, and the
#                                        stream's batch rate (about 1 minute)
#   bash tools/train/gpu_run.sh smoke    on any CPU: the same code, tiny geometry, a few steps
#
# The schedule is by global step (one cosine over STEPS, phases by step), so any
# number of calls continue one curve: causal [0, CAUSAL), block diffusion
# [CAUSAL, SHARPEN), block diffusion + entropy sharpening [SHARPEN, STEPS).
# Environment overrides: STEPS (1800: the cosine's length; a resumed run past 1800 needs
# more), SHARPEN (default STEPS: no sharpening), PREFIX_P (train.py --prefix-p: a share of
# the blocks masked as a left-to-right decode leaves them; default 0), DISTILL_NEAR
# (train.py --distill-near: the exact-teacher KL on rows with the causal context; default 0),
# SD_P (train.py --sd-p: a share of the rows replaced by the model's own greedy answers,
# made at the call's start from SD_PROMPTS prompts, default 8192, or read from a carried
# .gpu-train/sd-rows.pt; default 0: none),
# EVAL_PROMPTS (20: train.py's held-out evaluation at the end; 0 skips its ~30 s),
# ENGINE_MASK_P (train.py --engine-mask-p: a share of the rows masked as the engine leaves
# them, from the model's own SPEC 3 passes; default 0: masks unchanged), ENGINE_TH (0.95),
# ENGINE_PASSES (8: the passes' cap, each a forward of the chosen rows), ENGINE_FILL (true|own),
# ENGINE_K (the --max-distance rule in those passes; default: SPEC 3), LR (1.5e-3: the peak),
# COSINE_FROM (train.py --cosine-from: a fresh warm-up and cosine over [COSINE_FROM, STEPS];
# default 0: the one curve from step 0),
# MINUTES (training wall time; default: until 540 s after the script started), BUDGET_S
# (540), COMPILE=1 (torch.compile; untested on the device), TRAIN_EXTRA (arguments appended
# to train.py's: a CPU dry run of this script uses
# TRAIN_EXTRA="--geometry tiny --batch 2 --seq 64 --eval-prompts 1 --eval-tokens 4").
set -o pipefail
T0=$(date +%s)
cd "$(dirname "$0")/../.."
PHASE=${1:?usage: gpu_run.sh train|check|smoke}
OUT=${OUT:-/tmp/gpu-run-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
PACK=.gpu-train/corpus
GEOM=demo
STEPS=${STEPS:-1800}; CAUSAL=800
# no entropy sharpening unless SHARPEN < STEPS is asked for (PLAN.md, "Diagnosis at step 1257")
SHARPEN=${SHARPEN:-$STEPS}
SCHED=(--geometry $GEOM --steps $STEPS --causal-steps $CAUSAL --sharpen-from $SHARPEN --entropy 0.05
       --batch 256 --seq 512 --block 32 --lr ${LR:-1.5e-3} --warmup 100 --rewarmup 30
       --cosine-from ${COSINE_FROM:-0} --engine-mask-p ${ENGINE_MASK_P:-0}
       --engine-threshold ${ENGINE_TH:-0.95} --engine-passes ${ENGINE_PASSES:-8}
       --engine-fill ${ENGINE_FILL:-true} ${ENGINE_K:+--engine-max-distance $ENGINE_K}
       --ramp 300 --r-min 0.05 --full-p 0.25 --complementary --distill 0.5
       --prose-p 0.3 --prose-p-diff 0.05 --think-p 0.2 --seed 26 --prefix-p ${PREFIX_P:-0}
       --distill-near ${DISTILL_NEAR:-0} --sd-p ${SD_P:-0} --sd-prompts ${SD_PROMPTS:-8192})
# self-distillation rows: a carried .gpu-train/sd-rows.pt (or one a warm machine kept in
# .gpu-keep) is read, no decoding; else the call decodes them and writes $OUT/sd-rows.pt
# (take_back.sh keeps it for the next call)
if [ "${SD_P:-0}" != 0 ]; then
    if [ -f .gpu-train/sd-rows.pt ]; then SCHED+=(--sd-rows .gpu-train/sd-rows.pt)
    elif [ -f .gpu-keep/sd-rows.pt ]; then SCHED+=(--sd-rows .gpu-keep/sd-rows.pt)
    else SCHED+=(--sd-rows "$OUT/sd-rows.pt"); fi
fi
# .gpu-keep/ckpt: the previous call's checkpoint, left on the device (an ignored,
# uncarried folder survives between calls while the machine stays warm), taken
# when it is ahead of the carried one: back-to-back calls need no round trip
init=""
stepof() { $PY -c 'import json,sys;print(json.load(open(sys.argv[1]))["step"])' "$1/state.json"; }
for d in .gpu-train/ckpt; do
    if [ -f "$d/state.json" ]; then init=$d; break; fi
done
if [ -f .gpu-keep/ckpt/state.json ] && { [ -z "$init" ] || [ "$(stepof .gpu-keep/ckpt)" -gt "$(stepof $init)" ]; }; then
    init=.gpu-keep/ckpt
fi
if [ ! -f $PACK/SOURCES.json ] && [ "$PHASE" != smoke ]; then
    echo "gpu_run: no source pack in $PACK: run 'python3 tools/train/fetch_corpus.py --out $PACK' on the dev box and carry .gpu-train" >&2
    exit 2
fi
case "$PHASE" in
train)
    L=$OUT/train.log
    { nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; date -u;
      echo "gpu_run: resuming from ${init:-scratch}"; } 2>&1 | tee "$L"
    timeout 60 $PY tools/train/check_cuda.py 2>&1 | tee -a "$L" ||
        { echo "gpu_run: grouped MoE failed its check: the loop MoE" | tee -a "$L"; export CLOVER_TRAIN_LOOP_MOE=1; }
    if [ -z "$init" ]; then    # the first call: the complementary views through the grouped MoE
        timeout 90 $PY -m pytest -q -x -p no:cacheprovider tools/train/tests/test_issue26.py -k cuda 2>&1 | tee -a "$L" ||
            { echo "gpu_run: the two-view CUDA check failed: stopping" | tee -a "$L"; exit 1; }
    fi
    extra=()
    [ "${COMPILE:-0}" = 1 ] && extra+=(--compile)
    # block diffusion (three streams) ran out of memory at 256 rows on the H200 and
    # went on in 2 micro-batches (h200-26-call2.log): start a resumed call there
    # rather than spend the first step on the out-of-memory retry
    if [ -n "$init" ] && [ "$($PY -c 'import json,sys;print(json.load(open(sys.argv[1]))["step"])' "$init/state.json")" -ge $CAUSAL ]; then
        extra+=(--accum 2)
    fi
    # stop training at ~540 s after this script started (the call's limit is 600 s;
    # the held-out evaluation and the last save take ~30-45 s after the stop)
    left=$(( ${BUDGET_S:-540} - ($(date +%s) - T0) ))
    MIN=${MINUTES:-$(awk "BEGIN{print $left/60}")}
    echo "gpu_run: training for $MIN minutes" | tee -a "$L"
    timeout $(( left + 50 )) $PY tools/train/train.py --pack $PACK --tok tools/train/tok --ckpt "$OUT/ckpt" \
        ${init:+--init-from "$init"} --ckpt-int8 --bf16 "${SCHED[@]}" "${extra[@]}" \
        --stop-after-min "$MIN" --save-every-s 120 --log-every 20 --eval-every 100000 \
        --eval-prompts ${EVAL_PROMPTS:-20} --eval-tokens 96 --thresholds 0.9 0.5 --heldout tools/train/heldout.txt \
        ${TRAIN_EXTRA:-} 2>&1 | tee -a "$L"
    rc=$?
    ls -la "$OUT/ckpt" 2>&1 | tee -a "$L"
    if [ -f "$OUT/ckpt/state.json" ]; then
        rm -rf .gpu-keep/ckpt; mkdir -p .gpu-keep; cp -r "$OUT/ckpt" .gpu-keep/ckpt
        [ -f "$OUT/sd-rows.pt" ] && cp "$OUT/sd-rows.pt" .gpu-keep/sd-rows.pt
    fi
    exit $rc ;;
check)
    L=$OUT/check.log
    nvidia-smi 2>&1 | head -15 | tee "$L"
    $PY -c "import torch, transformers, tokenizers; print(torch.__version__, transformers.__version__, tokenizers.__version__)" 2>&1 | tee -a "$L"
    timeout 120 $PY tools/train/check_cuda.py 2>&1 | tee -a "$L"
    timeout 300 $PY -m pytest -q -x tools/train/tests/test_issue26.py 2>&1 | tee -a "$L"
    timeout 120 $PY tools/train/train.py --pack $PACK --tok tools/train/tok --ckpt /tmp/ck-probe \
        --ckpt-int8 --bf16 "${SCHED[@]}" --causal-steps 20 --max-steps-run 40 --log-every 10 \
        --eval-prompts 0 --save-every-s 1e9 2>&1 | tee -a "$L" ;;
smoke)
    # CPU: every stage of the pipeline, tiny geometry (PLAN.md has the timings)
    S=${2:-/tmp/clover-smoke26}
    rm -rf "$S"; mkdir -p "$S"
    [ -f $PACK/SOURCES.json ] || $PY tools/train/fetch_corpus.py --out $PACK
    T=(--pack $PACK --tok tools/train/tok --ckpt "$S/ckpt" --ckpt-int8 --geometry tiny --steps 8
       --causal-steps 3 --ramp 2 --full-p 0.25 --complementary --sharpen-from 7 --entropy 0.05
       --batch 4 --seq 128 --block 32 --log-every 1 --eval-prompts 1 --eval-tokens 8 --lr 3e-3
       --warmup 2 --workers 2 --heldout tools/train/heldout.txt --seed 26 --thresholds 0.5)
    OMP_NUM_THREADS=2 $PY tools/train/train.py "${T[@]}" --max-steps-run 5 || exit 1
    OMP_NUM_THREADS=2 $PY tools/train/train.py "${T[@]}" || exit 1          # resumes at step 5
    $PY tools/train/export_ckpt.py --tok tools/train/tok --ckpt "$S/ckpt" --out "$S/hf" \
        --geometry tiny --block 32 || exit 1
    build/clover convert "$S/hf" -o "$S/smoke.gguf" --type q8_0 || exit 1
    build/clover info "$S/smoke.gguf" || exit 1
    build/clover run -m "$S/smoke.gguf" -p "Hello" --max-tokens 32 --no-visual || exit 1
    $PY tools/train/eval.py --gguf "$S/smoke.gguf" --limit 3 --max-tokens 16 --thresholds 0.9 0.3 ;;
*) echo "gpu_run: unknown phase '$PHASE' (train, check, smoke)" >&2; exit 2 ;;
esac
