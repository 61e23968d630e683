# compare.py NEW_JSON OLD_JSON: whether the new path's answers (sequential and concurrent) equal the old
# switches' sequential ones, request by request.
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ref = b["answers_seq"]
bad = [i for i in range(len(ref)) if a["answers_seq"][i] != ref[i] or a["answers_con"][i] != ref[i]
       or b["answers_con"][i] != ref[i]]
print(f"new path = old switches on {len(ref) - len(bad)}/{len(ref)} requests (sequential and concurrent)"
      + (f"; differing: {bad}" if bad else ""))
