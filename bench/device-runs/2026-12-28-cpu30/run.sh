#!/usr/bin/env bash
# Written in the 2026-12-05 21:10 session (issue 30): this session's AVX-512 levels of the CPU attention core
# (attention_avx512.c) and of the GDN block operator (gdn_block_avx512.c), on the device host's Xeon (AVX-512 VNNI,
# AMX): their tests with the real instructions, and bench_ops' per-operator figures at 1 and 16 threads, before
# ops30's step b (bench_backend's preview at the amx and avx2 levels: the bar's avx2 / amx >= 3x).
#   cmake --build build -j2 && EXTRA_BINS="libclover_kernel_trace.so bench_backend bench_ops \
#     test_cpu_attention_avx512 test_cpu_attention_split test_gdn_block test_gdn_block_avx512 test_cpu_gdn" scripts/device-packs.sh build seq
#   ITEMS='cpu30:t,o ops30:b' bash .gpu-seq/run.sh
# STEPS:
#  t  CPU_TESTS (default: test_cpu_attention_avx512 test_cpu_attention_split test_gdn_block test_gdn_block_avx512 test_cpu_gdn), each as shipped and
#     with CLOVER_NO_AVX512=1 (the AVX2 level)
#  o  bench_ops 1 attention, bench_ops 16 attention, bench_ops 16 gdn
# Predicted (dev VM, 2 vCPUs: the attention core at a preview's shape 12.2 -> 3.2 ms a thread; H100 host seq2 of
#  occ25: preview amx 0.1097 s = gdn 0.0320 attn 0.0172 moe 0.0514 head 0.0085, avx2 0.232-0.235): the amx preview's
#  attention family 0.017 -> ~0.009 s, gdn -0.002..-0.004 s: amx preview ~0.095-0.099 s, avx2 unchanged: ratio
#  ~2.35-2.5x (bar 3x: not met by these alone).
set -uo pipefail
PACK=${PACK:-.gpu-seq}
STEPS=${STEPS:-t o}
. "$PACK/lib.sh"
dr_init cpu30
say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) ($(nproc) cpus); flags: $(grep -m1 -o -w \
'avx512_vnni\|amx_int8' /proc/cpuinfo | sort -u | tr '\n' ' ')"
if has t; then
  for n in ${CPU_TESTS:-test_cpu_attention_avx512 test_cpu_attention_split test_gdn_block test_gdn_block_avx512 test_cpu_gdn}; do
    tst $n asis 120
    tst $n avx2 120 CLOVER_NO_AVX512=1
  done
fi
if has o; then
  for a in "1 attention" "16 attention" "16 gdn"; do
    timeout 90 "$D/bin/bench_ops" $a > "$O/ops_${a// /_}.log" 2>&1
    say "== bench_ops $a rc=$? at +$(el)s"
    grep -E "^(attention|gdn block|layer +gdn block)" "$O/ops_${a// /_}.log" | cut -c1-150 | tee -a "$S"
  done
fi
dr_end
