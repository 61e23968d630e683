#!/usr/bin/env bash
# Written in the 2026-12-05 07:04 session (issue 30; no device was lent that session, so this has not run): where
# a 32-row preview's time goes on the H200 host (16-vCPU Xeon, AMX) at the amx and avx2 levels, split into the
# matrix products and the rest of each operator family (bench_backend's new "in products" line, from
# matmul_thread_seconds), so the next change to the preview's avx2 / amx ratio (bar 3x; 2.18-2.6x measured) goes
# where the time is: the AMX Q4_K kernel (if moe's products are most of moe), or the mixers' own work (if gdn /
# attn have a large rest at 16 threads; at 2 threads on the dev VM the rest is 3-15% of each family).
#   cmake --build build -j2 && EXTRA_BINS="bench_backend bench_ops" scripts/device-packs.sh build ops30
#   run(command="bash .gpu-ops30/run.sh", carry=[".gpu-ops30"], timeout_s=300)  (or riding after another call)
# STEPS (default "b o"):
#  b  bench_backend on the 35B-A3B diffusion file, 16 threads, --rows 512 --reps 3: amx, avx2, amx, avx2
#     (alternating), each pass's families with their products' share
#  o  (added 2026-12-05 08:52) bench_ops 16 gdn: a preview's GDN block operator (32 rows, the 35B's dims) on one
#     thread against 16; predicted pool(1) ~2-2.5 ms, pool(16) ~0.2-0.3 ms (8-11x; the dev VM's 2 threads: 1.80x)
# Predictions (before the run; amx30: preview amx 0.126 s = gdn 0.042 attn 0.021 moe 0.054 head 0.010, avx2 0.325):
#  amx preview: products ~70-80% of gdn (~0.030 of 0.042), ~40-60% of attn (the attention core and its
#  prepare on few threads), ~75-85% of moe; head ~100%. avx2: products >= 85% of every family. If so, the
#  ratio's next step is the AMX Q4_K kernel and the attention layer's rest.
set -uo pipefail
PACK=${PACK:-.gpu-ops30}
STEPS=${STEPS:-b o}
. "$PACK/lib.sh"
dr_init ops30
unset CLOVER_AMX_Q4K_REPACK CLOVER_AMX_Q4K_PIPE CLOVER_AMX_Q4K_REPACK_MB CLOVER_NO_AMX CLOVER_NO_AVX512
say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) ($(nproc) cpus); load $(cut -d' ' -f1-3 /proc/loadavg)"
M=${OPS30_MODEL:-/tmp/synth35-clover.gguf}
if [ ! -s "$M" ]; then
  timeout 170 "$D/bin/clover" synth --preset qwen3.5-35b-a3b -o "$M.part" > "$O/synth.log" 2>&1 && mv "$M.part" "$M"
  say "synth at +$(el)s: $(tail -1 "$O/synth.log")"
fi
[ -s "$M" ] || { say "no model file $M"; if has o; then
  if [ -x "$D/bin/bench_ops" ]; then
    timeout 60 "$D/bin/bench_ops" 16 gdn > "$O/ops_gdn.log" 2>&1
    say "bench_ops 16 gdn rc=$?: $(grep -E '^gdn block' "$O/ops_gdn.log")"
  else say "bench_ops not in the pack"; fi
fi
dr_end; exit 3; }
fig() { awk -v p="$2" 'index($0, p) == 1 && $0 ~ /median/ { for (i = 1; i <= NF; i++) if ($i == "median") { print $(i + 1); exit } }' "$1" 2>/dev/null; }
line() { grep -A3 -E "^$2" "$1" 2>/dev/null | grep -E "$3" | head -1 | sed -E 's/ +/ /g; s/^ //'; }
if has b; then
  for lv in auto avx2 auto avx2; do
    [ "$(el)" -lt "${OPS30_BUDGET:-250}" ] || { say "no time for $lv"; continue; }
    k=0; while [ -e "$O/b_$lv$k.log" ]; do k=$((k + 1)); done; L=$O/b_$lv$k.log
    timeout 90 "$D/bin/bench_backend" "$M" --threads 16 --prompt 512 --gen 4 --block 32 --rows 512 --reps 3 \
      --mb 256 --simd $lv > "$L" 2>&1
    say "$lv rc=$? at +$(el)s: preview p=0.9 $(fig "$L" 'preview 32 rows, p') s; commit 32 $(fig "$L" 'commit 32-row') s; prompt 512 $(fig "$L" 'prompt 512') s"
    for p in 'preview 32 rows, p' 'commit 32-row'; do
      say "    $p: $(line "$L" "$p" 'per run') | $(line "$L" "$p" 'in products')"
    done
  done
fi
if has o; then # (2026-12-05 14:27: step o ran only when the model file was missing; now after b as well)
  if [ -x "$D/bin/bench_ops" ]; then
    timeout 60 "$D/bin/bench_ops" 16 gdn > "$O/ops_gdn.log" 2>&1
    say "bench_ops 16 gdn rc=$?: $(grep -E '^gdn block' "$O/ops_gdn.log")"
  else say "bench_ops not in the pack"; fi
fi
dr_end
