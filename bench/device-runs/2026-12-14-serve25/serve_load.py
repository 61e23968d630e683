# serve_load.py PORT N MAX_TOKENS OUT_JSON: 2026-12-05-serve25/serve_load.py (N chat requests one at a time, then
# the same N at once; tokens/s of both, the ratio, whether every concurrent answer equals its sequential one) plus,
# for each phase, the deltas of the server's step counters (/metrics): engine steps, sequences per step, model
# passes (sequences per pass), rows, and where the scheduler's wall time went (backend calls, the steps' host work,
# the rest of the scheduler loop, and the idle time between requests).
import json, sys, threading, time, urllib.request
port, n, max_tokens, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
base = f"http://127.0.0.1:{port}"
with urllib.request.urlopen(f"{base}/v1/models", timeout=60) as r:
    model = json.load(r)["data"][0]["id"]
NAMES = ["clover_step_sequences_count", "clover_step_sequences_sum", "clover_backend_passes_total",
         "clover_step_rows_total", "clover_backend_seconds_total", "clover_step_seconds_total",
         "clover_scheduler_seconds_total", "clover_snapshot_seconds_total", "clover_passes_total",
         "clover_completion_tokens_total"]
def metrics():
    t = urllib.request.urlopen(f"{base}/metrics", timeout=30).read().decode()
    v = {}
    for line in t.splitlines():
        k, _, x = line.partition(" ")
        if k in NAMES or k.startswith("clover_step_sequences_bucket"):
            v[k] = float(x)
    return v
def ask(i, res):
    body = {"model": model, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "messages": [{"role": "user", "content": f"Request {i}: write about the sea, the wind and boat {i * 7}."}]}
    req = urllib.request.Request(f"{base}/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t = time.time()
    with urllib.request.urlopen(req, timeout=900) as r:
        d = json.load(r)
    res[i] = (d["choices"][0]["message"]["content"], d["usage"]["completion_tokens"], time.time() - t)
def phase(fn):
    m0, t = metrics(), time.time()
    fn()
    wall, m1 = time.time() - t, metrics()
    d = {k: m1.get(k, 0) - m0.get(k, 0) for k in m1}
    steps = d.get("clover_step_sequences_count", 0) or 1
    passes = d.get("clover_backend_passes_total", 0) or 1
    s = {"wall_s": wall, "steps": d.get("clover_step_sequences_count", 0),
         "seqs_per_step": d.get("clover_step_sequences_sum", 0) / steps,
         "seqs_per_pass": d.get("clover_step_sequences_sum", 0) / passes,
         "passes_per_step": d.get("clover_backend_passes_total", 0) / steps,
         "rows_per_step": d.get("clover_step_rows_total", 0) / steps,
         "backend_s": d.get("clover_backend_seconds_total", 0),
         "step_host_s": d.get("clover_step_seconds_total", 0) - d.get("clover_backend_seconds_total", 0),
         "snapshot_s": d.get("clover_snapshot_seconds_total", 0),
         "sched_other_s": d.get("clover_scheduler_seconds_total", 0) - d.get("clover_step_seconds_total", 0),
         "idle_s": wall - d.get("clover_scheduler_seconds_total", 0),
         "hist": {k.split('"')[1]: v for k, v in d.items() if k.startswith("clover_step_sequences_bucket")}}
    return wall, s
def fmt(s):
    return (f"{s['steps']:.0f} steps, {s['seqs_per_step']:.2f} seqs/step, {s['seqs_per_pass']:.2f} seqs/pass "
            f"({s['passes_per_step']:.2f} passes/step), {s['rows_per_step']:.1f} rows/step; wall {s['wall_s']:.3f} s = "
            f"backend {s['backend_s']:.3f} + step host {s['step_host_s']:.3f} (snapshots {s['snapshot_s']:.3f}) "
            f"+ scheduler other {s['sched_other_s']:.3f} "
            f"+ idle {s['idle_s']:.3f}")
seq, con = [None] * n, [None] * n
t_seq, s_seq = phase(lambda: [ask(i, seq) for i in range(n)])
def conc():
    th = [threading.Thread(target=ask, args=(i, con)) for i in range(n)]
    for x in th: x.start()
    for x in th: x.join()
t_con, s_con = phase(conc)
tok_seq, tok_con = sum(r[1] for r in seq), sum(r[1] for r in con)
same = all(a[0] == b[0] for a, b in zip(seq, con))
r = {"sequential_tok_s": tok_seq / t_seq, "concurrent_tok_s": tok_con / t_con, "ratio": (tok_con / t_con) / (tok_seq / t_seq),
     "tokens": [tok_seq, tok_con], "seconds": [t_seq, t_con], "identical": same, "steps_seq": s_seq, "steps_con": s_con,
     "differing": [i for i in range(n) if seq[i][0] != con[i][0]],
     "answers_seq": [a[0] for a in seq], "answers_con": [a[0] for a in con]}
json.dump(r, open(out, "w"), indent=1)
print(f"sequential {r['sequential_tok_s']:.1f} tok/s, {n} concurrent {r['concurrent_tok_s']:.1f} tok/s, "
      f"ratio {r['ratio']:.2f}x, answers identical: {same}")
print(f"  sequential: {fmt(s_seq)}")
print(f"  concurrent: {fmt(s_con)}; histogram (le: steps) {s_con['hist']}")
