# serve_load.py PORT N MAX_TOKENS OUT_JSON: N chat requests one at a time, then the same N at once (the client
# of bench/device-runs/2026-12-02-backend-run.sh, plus every answer in OUT_JSON so two server runs, the new path
# and the old switches, can be compared); prints tokens/s of both, the ratio, and whether every concurrent
# answer equals its sequential one.
import json, sys, threading, time, urllib.request
port, n, max_tokens, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=60) as r:
    model = json.load(r)["data"][0]["id"]
def ask(i, res):
    body = {"model": model, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "messages": [{"role": "user", "content": f"Request {i}: write about the sea, the wind and boat {i * 7}."}]}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t = time.time()
    with urllib.request.urlopen(req, timeout=900) as r:
        d = json.load(r)
    res[i] = (d["choices"][0]["message"]["content"], d["usage"]["completion_tokens"], time.time() - t)
seq, con = [None] * n, [None] * n
t = time.time()
for i in range(n): ask(i, seq)
t_seq = time.time() - t
th = [threading.Thread(target=ask, args=(i, con)) for i in range(n)]
t = time.time()
for x in th: x.start()
for x in th: x.join()
t_con = time.time() - t
tok_seq, tok_con = sum(r[1] for r in seq), sum(r[1] for r in con)
same = all(a[0] == b[0] for a, b in zip(seq, con))
r = {"sequential_tok_s": tok_seq / t_seq, "concurrent_tok_s": tok_con / t_con, "ratio": (tok_con / t_con) / (tok_seq / t_seq),
     "tokens": [tok_seq, tok_con], "seconds": [t_seq, t_con], "identical": same,
     "differing": [i for i in range(n) if seq[i][0] != con[i][0]],
     "answers_seq": [a[0] for a in seq], "answers_con": [a[0] for a in con]}
json.dump(r, open(out, "w"), indent=1)
print(f"sequential {r['sequential_tok_s']:.1f} tok/s, {n} concurrent {r['concurrent_tok_s']:.1f} tok/s, "
      f"ratio {r['ratio']:.2f}x, answers identical: {same}")
