#!/usr/bin/env bash
# The AVX-512 VNNI multi-row kernels of branch vnni30 on the H200 machine's Xeon host (CPU only, no GPU used):
# tests, bench_gemm_levels per level (1 and 16 threads), clover's bench_backend per level at the CPU engine's
# prompt chunk (--rows 512) and at the 64-row chunk the 2026-12-07 run used (--rows 64), llama.cpp's CPU
# llama-bench (-p 512 -n 32 -t 16) on the same weights, and a perf profile of the VNNI prompt at 16 threads.
#   run(command="bash .gpu-vnni30/run.sh", carry=[".gpu-vnni30"], timeout_s=600)   (from /work/main)
# The pack: cmake --build build -j2 && EXTRA_BINS="test_act_stage test_matmul test_matmul_batch test_quant_avx512
#   test_quant_amx test_matmul_amx_emu bench_gemm_levels" LLAMA_BENCH=/path/to/llama-bench \
#   scripts/device-packs.sh build vnni30
#   && nm -n build/bench/bench_backend > .gpu-vnni30/bench_backend.nm   (the perf step names symbols with it)
# (without LLAMA_BENCH: put scripts/llama-src.sh's llama-src.txz into .gpu-vnni30/ and it is built here, as in
# 2026-12-06-amx2/run.sh). Wall: ~300-420 s; a guard skips what would pass 540 s. Predictions: PREDICTIONS.md.
# Branch scale30 (issue 30 at 16 threads; its section of PREDICTIONS.md) adds: the CPU's topology line, an A/B of
# matmul's new split / fused staging / futex wake-up against the old ones in the same binary (CLOVER_OLD_SPLIT=1,
# CLOVER_POOL_CONDVAR=1) with bench_gemm_levels at 16 threads (~25 s), and bench_backend amx / vnni with the old
# switches (after llama-bench, guarded: ~45 s). It needs no other binary in the pack.
#
# Why --rows 512: the CPU engine commits a prompt in 512-row passes (backend_ops.default_rows), but the 2026-12-07
# run timed bench_backend at --rows 64, where a routed expert gets ~2 rows of a chunk (64 x 8 / 256) and takes the
# one-row dot, not the multi-row kernels; on the dev VM (2 threads, 4 layers) 512-row chunks were 1.3x 64-row
# ones (MoE 1.69 -> 0.90-1.0 s). --rows 64 is kept for the comparison with 2026-12-07's figures.
set -uo pipefail
R=${OUT:-/tmp/out}; mkdir -p "$R"; S=$R/summary.txt; PK=.gpu-vnni30
T0=$(date +%s)
P=/tmp/vnni30-pack; rm -rf $P; mkdir -p $P; tar xJf $PK/pack.txz -C $P || { echo "unpacking $PK/pack.txz failed" | tee "$S"; exit 2; }
export CLOVER_SOURCE_DIR=$PWD
export LD_LIBRARY_PATH=$P/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
left() { echo $(( ${VNNI30_BUDGET:-540} - ($(date +%s) - T0) )); }
say() { echo "$*" | tee -a "$S"; }
say "start $(date -u +%T) commit $(cat $PK/COMMIT) cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) ($(nproc) cpus), load $(cut -d' ' -f1-3 /proc/loadavg)"
say "flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512f|avx512_vnni|avx512_bf16|amx_tile|amx_int8)$' | tr '\n' ' ')"
# scale30: are the 16 cpus 16 cores or 8 with two threads each (AMX and the vector ports are per core)?
say "topology: $(lscpu 2>/dev/null | grep -E '^(Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\)|CPU max MHz|L2 cache|L3 cache)' | sed 's/  */ /g' | tr '\n' ';')"

M=/tmp/vnni30-35b-a3b.gguf; A=/tmp/vnni30-35b-a3b-ar.gguf
( timeout 170 $P/bin/clover synth --preset ${VNNI30_PRESET:-qwen3.5-35b-a3b} -t 8 -o $M > "$R/synth.log" 2>&1; echo "synth rc=$?" >> "$R/synth.log" ) &
SYN=$!
( timeout 170 $P/bin/clover synth --preset ${VNNI30_PRESET:-qwen3.5-35b-a3b} --no-diffusion -t 8 -o $A > "$R/synth-ar.log" 2>&1; echo "synth rc=$?" >> "$R/synth-ar.log" ) &
SYNA=$!
LBB=
if [ ! -x $P/llama/llama-bench ] && [ -s $PK/llama-src.txz ]; then
  ( mkdir -p /tmp/llama-cpu-src && tar xJf $PK/llama-src.txz -C /tmp/llama-cpu-src &&
    cmake -S /tmp/llama-cpu-src/llama.cpp -B /tmp/llama-cpu -DGGML_CUDA=OFF -DGGML_NATIVE=OFF -DGGML_AVX512=ON \
      -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AMX_INT8=ON -DGGML_AMX_TILE=ON -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_CURL=OFF \
      -DLLAMA_OPENSSL=OFF -DCMAKE_BUILD_TYPE=Release > "$R/llama-cmake.log" 2>&1 &&
    timeout 200 cmake --build /tmp/llama-cpu -j8 --target llama-bench > "$R/llama-build.log" 2>&1
    echo "llama-bench build rc=$? at $(( $(date +%s) - T0 ))s" >> "$R/llama-build.log" ) &
  LBB=$!
fi

# Tests while the files are written: every level bit for bit against the one-row dots and the AVX2 kernels.
t() { local n=$1; shift
  env "$@" timeout 90 $P/bin/$n > "$R/$n${1:+.${1%%=*}}.log" 2>&1; local rc=$?
  say "test $n ${*:-} rc=$rc $(grep -m1 -E '^level|^SKIP' "$R/$n${1:+.${1%%=*}}.log") | $(tail -1 "$R/$n${1:+.${1%%=*}}.log")"; }
t test_quant_avx512
t test_act_stage
t test_act_stage CLOVER_NO_AMX=1
t test_quant_amx
t test_matmul_amx_emu
t test_matmul
t test_matmul CLOVER_NO_AMX=1
t test_matmul_batch
wait $SYN $SYNA
say "synth: $(tail -1 "$R/synth.log"), --no-diffusion $(tail -1 "$R/synth-ar.log"), at $(( $(date +%s) - T0 ))s"
# The peer first, alone: its build and llama-bench never beside clover's timed runs (2026-12-04 16:05: the build
# and llama-bench overlapped the new path's bench_backend runs, load 6-10, and those figures said nothing).
LB=$P/llama/llama-bench; LLAMA_NOTE="AMX build"
if [ -n "$LBB" ]; then wait $LBB; say "$(tail -1 "$R/llama-build.log")"; LB=/tmp/llama-cpu/bin/llama-bench; fi
if [ "$(left)" -gt 30 ]; then
  timeout $(( $(left) > 100 ? 100 : $(left) )) $LB -m $A -p 512 -n 32 -t 16 -r 2 > "$R/llama-bench.log" 2>&1; rc=$?
  say "llama-bench rc=$rc ($LLAMA_NOTE)"
  if [ $rc = 132 ] || grep -q "Illegal instruction" "$R/llama-bench.log"; then
    LLAMA_NOTE="AMX build died with SIGILL; --repack 0"
    [ "$(left)" -gt 30 ] && timeout $(( $(left) > 100 ? 100 : $(left) )) $LB -m $A -p 512 -n 32 -t 16 -r 2 --repack 0 \
      > "$R/llama-bench.log" 2>&1
  fi
  grep -E "^\| (model|.*pp512|.*tg32)" "$R/llama-bench.log" | tee -a "$S"
else say "no time left for llama-bench"; fi

# The kernels per level: 1 thread (thread CPU time: the kernel's own rate) and 16 (wall).
g() { local label=$1 th=$2; shift 2
  env "$@" timeout 40 $P/bin/bench_gemm_levels --types q8_0,q4_K,q6_K --rows 16,32,512 --threads $th --reps 7 > "$R/gemm-$label-$th.log" 2>&1; }
for th in 1 16; do g amx $th; g vnni $th CLOVER_NO_AMX=1; g avx2 $th CLOVER_NO_AVX512=1; done
say "bench_gemm_levels 2048x2048, GMAC/s: type rows | amx | vnni | avx2 (1 thread; 16 threads)"
for ty in q8_0 q4_K q6_K; do for rows in 16 32 512; do
  v() { awk -v t=$ty -v r=$rows '$1==t && $2==r {print $4}' "$R/gemm-$1-$2.log"; }
  say "  $ty $rows | $(v amx 1) | $(v vnni 1) | $(v avx2 1) ; $(v amx 16) | $(v vnni 16) | $(v avx2 16)"
done; done

# scale30 (issue 30, 16 threads): matmul's split (a task >= 2^19 multiply-adds; whole 16-row runs at the AMX level),
# the staging and the product in one run of the pool, the pool's futex wake-up; against the old ones in the same
# process: --ab CLOVER_OLD_SPLIT times each product without and with CLOVER_OLD_SPLIT=1 (runs of 4 rows, the staging
# in a run of its own), alternating; CLOVER_POOL_CONDVAR=1 (read when the pool is made) is a second process. Shapes:
# 2048 x 2048 and a routed expert's gate / up (512 x 2048); --gap-us 200: the pool's threads asleep when each product
# starts (past their 50 us spin), as after a stretch of the caller's own work in a pass.
sg() { local label=$1; shift
  env "$@" timeout 60 $P/bin/bench_gemm_levels --threads 16 --types q8_0,q4_K --reps 9 --ab CLOVER_OLD_SPLIT $SGA \
    > "$R/s30-$label.log" 2>&1; }
for out in 2048 512; do SGA="--out $out --rows 16,32,512"; sg amx-$out; sg vnni-$out CLOVER_NO_AMX=1; done
SGA="--out 512 --rows 16,32 --gap-us 200"; sg amx-gap; sg amx-gap-cv CLOVER_POOL_CONDVAR=1
# --ab columns: type rows best GMAC/s median best_old median_old median_old/median (printed: best (median), old/new)
say "scale30 bench_gemm_levels 16 threads, ms best (median): type rows | new | old (CLOVER_OLD_SPLIT=1) | old/new of medians"
for sh in amx-2048 vnni-2048 amx-512 vnni-512 amx-gap amx-gap-cv; do for ty in q8_0 q4_K; do for rows in 16 32 512; do
  l=$(awk -v t=$ty -v r=$rows '$1==t && $2==r {printf "%s (%s) | %s (%s) | %.2fx", $3, $5, $6, $7, $8}' \
    "$R/s30-$sh.log" 2>/dev/null)
  [ -n "$l" ] && say "  $sh $ty $rows | $l"
done; done; done

# clover's passes: per level at 512-row chunks, and the VNNI level at 64 (2026-12-07's setting).
b() { local label=$1 lv=$2 rows=$3 reps=$4
  [ "$(left)" -gt 90 ] || { say "no time left for bench_backend $label"; return; }
  env ${BENV:-} timeout 80 $P/bin/bench_backend $M --threads 16 --prompt 512 --gen 12 --block 32 --rows $rows --reps $reps --mb 256 \
    --simd $lv > "$R/backend-$label.log" 2>&1
  say "bench_backend $label rc=$? $(grep -m1 '^threads' "$R/backend-$label.log") at $(( $(date +%s) - T0 ))s"; }
b vnni-512 avx512 512 3; b amx-512 auto 512 2; b avx2-512 avx2 512 2; b vnni-64 avx512 64 2

# scale30: the passes with the old split, the staging's own run and the condition variable (same binary).
BENV="CLOVER_OLD_SPLIT=1 CLOVER_POOL_CONDVAR=1"; b amx-512-old auto 512 2; b vnni-512-old avx512 512 2; BENV=
# Where the VNNI prompt's time goes at 16 threads (perf, if the host has it; cpu-clock works without a PMU).
if command -v perf > /dev/null && [ "$(left)" -gt 70 ]; then
  timeout 60 perf record -e cpu-clock -F 499 -o /tmp/vnni30-perf.data $P/bin/bench_backend $M --threads 16 --prompt 512 \
    --rows 512 --gen 1 --gen-only --reps 2 --mb 16 --no-warm --simd avx512 > "$R/perf-run.log" 2>&1
  perf report -i /tmp/vnni30-perf.data --no-children --sort symbol 2>/dev/null | grep -v '^#' | grep -v '^$' | head -40 > "$R/perf-top.txt"
  # The pack's binaries are stripped: perf shows bench_backend's static functions as addresses; name them from
  # the unstripped build's symbol table when the pack has it (nm -n gives 16 lowercase hex digits, as perf does).
  if [ -s $PK/bench_backend.nm ]; then
    awk 'NR == FNR { if ($2 ~ /^[tTwW]$/) { a[n] = $1; s[n++] = $3 } next }
         { if (match($0, /0x[0-9a-f][0-9a-f]*/)) { x = substr($0, RSTART + 2, RLENGTH - 2); f = "?"
             for (i = 0; i < n && a[i] <= x; i++) f = s[i]
             $0 = $0 "  <" f ">" } print }' $PK/bench_backend.nm "$R/perf-top.txt" > "$R/perf-top-named.txt" &&
      mv "$R/perf-top-named.txt" "$R/perf-top.txt"
  fi
  say "perf (VNNI prompt 512, 16 threads), top symbols:"; head -15 "$R/perf-top.txt" | tee -a "$S"
else say "perf: not run (no perf on the host, or no time)"; fi

pp=$(awk -F'|' '/pp512/ {split($(NF-1), a, "±"); gsub(/ /, "", a[1]); print a[1]}' "$R/llama-bench.log" 2>/dev/null)
tg=$(awk -F'|' '/tg32/ {split($(NF-1), a, "±"); gsub(/ /, "", a[1]); print a[1]}' "$R/llama-bench.log" 2>/dev/null)

fig() { # label pattern field (1: median s, 3: median tok/s)
  awk -v pat="$2" -v c=$3 'f && index($0, pat) == 1 {n = split(substr($0, 29), a, " "); print a[c]; exit} /^summary/ {f = 1}' "$R/backend-$1.log" 2>/dev/null; }
say "clover bench_backend, 16 threads, median; llama.cpp ($LLAMA_NOTE) pp512 ${pp:-?} tok/s, tg32 ${tg:-?} tok/s (2026-12-07: 94.7 / 17.4)"
for l in vnni-512 amx-512 avx2-512 vnni-64 amx-512-old vnni-512-old; do
  [ -s "$R/backend-$l.log" ] || continue
  say "  $l: prompt 512 $(fig $l 'prompt 512' 3) tok/s; decode $(fig $l generation 3) tok/s; preview 32 p=0.90 $(fig $l 'preview 32 rows, p' 1) s, no coreset $(fig $l 'preview 32 rows, no' 1) s; commit 32 $(fig $l 'commit 32-row' 1) s"
done
for l in amx vnni; do [ -s "$R/backend-$l-512-old.log" ] &&
  say "scale30 $l, new / old switches: prompt 512 $(fig $l-512 'prompt 512' 3) / $(fig $l-512-old 'prompt 512' 3) tok/s; preview 32 p=0.90 $(fig $l-512 'preview 32 rows, p' 1) / $(fig $l-512-old 'preview 32 rows, p' 1) s; commit 32 $(fig $l-512 'commit 32-row' 1) / $(fig $l-512-old 'commit 32-row' 1) s"
done
best=$(for l in vnni-512 amx-512; do fig $l 'prompt 512' 3; done | sort -g | tail -1)
say "bar: prompt/pp512 $(awk -v a="$best" -v b="$pp" 'BEGIN{if (b>0) printf "%.2fx", a/b; else print "?"}') (need 1.5x); decode/tg $(awk -v a="$(fig vnni-512 generation 3)" -v b="$tg" 'BEGIN{if (b>0) printf "%.2fx", a/b; else print "?"}') (need 1.2x); preview avx2/vnni $(awk -v a="$(fig avx2-512 'preview 32 rows, p' 1)" -v b="$(fig vnni-512 'preview 32 rows, p' 1)" 'BEGIN{if (b>0) printf "%.2fx", a/b; else print "?"}'), avx2/amx $(awk -v a="$(fig avx2-512 'preview 32 rows, p' 1)" -v b="$(fig amx-512 'preview 32 rows, p' 1)" 'BEGIN{if (b>0) printf "%.2fx", a/b; else print "?"}') (need 3x)"
rm -f $M $A /tmp/vnni30-perf.data
say "end $(date -u +%T), $(( $(date +%s) - T0 ))s"
( cd "$R" && tar czf /tmp/vnni30-logs.tgz --exclude=summary.txt . ; mv /tmp/vnni30-logs.tgz logs.tgz &&
  find . -type f ! -name summary.txt ! -name logs.tgz -delete )
