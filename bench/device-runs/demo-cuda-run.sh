#!/usr/bin/env bash
# The built-in demo model (models/clover-demo-q8_0.gguf) on the H200: does
# `--device cuda` give the CPU's answers, and is block diffusion faster than
# `--ar` end to end there (the demo model's goal past its bar)? Never run yet.
#
#   run(command="PACK=.gpu-main bash bench/device-runs/demo-cuda-run.sh", carry=[".gpu-main"], timeout_s=300)
#
# PACK/pack.txz: bin/ + lib/ from `scripts/gpu-pack.sh build OUT PACK/pack.txz`
# (bin/clover is the command without an embedded model, so -m names the file).
# What travels: the tree (~46 MiB with the model) + the pack (~6 MiB).
#
# Per prompt (four of the held-out ones), greedy, thinking off, 96 tokens at
# most: the CPU (16 threads) and CUDA, block diffusion (threshold 0.9) and
# --ar. Printed: each answer's summary line (tokens, passes, tok/s) and whether
# CUDA's text equals the CPU's. Predictions (not measured): CUDA's --ar text
# equals the CPU's on most prompts but not necessarily all (this model's
# margins are small: the scalar and AVX-512 CPU paths already part on
# "Hello" after ~40 tokens); tok/s on CUDA is launch-bound for a 27.6M model:
# --ar ~300-600 tok/s, block diffusion ~1.5x that at 1.5 tokens a pass.
set -uo pipefail
PACK=${PACK:?PACK=folder with pack.txz}
R=${OUT:-/tmp/out}; mkdir -p "$R"
P=/tmp/demo-pack; rm -rf "$P"; mkdir -p "$P"; tar xf "$PACK/pack.txz" -C "$P" || exit 2
export LD_LIBRARY_PATH=$P/lib
M=models/clover-demo-q8_0.gguf
[ -f "$M" ] || { echo "no $M in the tree (hidden? scripts/device-tree.sh restore)"; exit 2; }
S=$R/summary.txt
say() { echo "$*" | tee -a "$S"; }
say "start $(date -u +%T) pack $(cat "$PACK/COMMIT" 2>/dev/null) $(nvidia-smi --query-gpu=name --format=csv,noheader)"
"$P/bin/clover" --version 2>&1 | tee -a "$S"
i=0
while IFS= read -r prompt; do
  i=$((i + 1))
  for mode in diffusion ar; do
    extra=(); [ $mode = ar ] && extra=(--ar)
    for dev in cpu cuda; do
      f=$R/p$i-$mode-$dev
      timeout 120 "$P/bin/clover" run -m "$M" -p "$prompt" --no-think --no-visual --max-tokens 96 \
        --device $dev --threads 16 "${extra[@]}" > "$f.txt" 2> "$f.err"
      echo "rc=$?" >> "$f.err"
    done
    same=$(cmp -s "$R/p$i-$mode-cpu.txt" "$R/p$i-$mode-cuda.txt" && echo "the same as" || echo "DIFFERENT from")
    say "[$i $mode] '$prompt': the cuda text is $same the cpu's"
    say "   cpu text:  $(tr '\n' ' ' < "$R/p$i-$mode-cpu.txt" | cut -c1-160)"
    say "   cuda text: $(tr '\n' ' ' < "$R/p$i-$mode-cuda.txt" | cut -c1-160)"
    say "   cpu:  $(grep '^\[' "$R/p$i-$mode-cpu.err" | tail -1)"
    say "   cuda: $(grep '^\[' "$R/p$i-$mode-cuda.err" | tail -1) $(grep -v '^\[' "$R/p$i-$mode-cuda.err" | grep -v '^rc=0' | head -2)"
  done
done <<'EOF'
What is the capital of France?
Tell me a short story about a dog.
Who are you?
Tell me about Japan.
EOF
say "end $(date -u +%T)"
