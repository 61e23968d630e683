#!/bin/bash
# Issue 26: the training checkpoint kept in git history, out of the working tree.
#
#   bash tools/train/ckpt_git.sh save      .gpu-train/ckpt -> a commit "train-ckpt: step N" whose tree
#                                          holds checkpoint/{state.json,weights-*.safetensors}, joined to
#                                          the current branch by `merge -s ours` (the branch's files do
#                                          not change)
#   bash tools/train/ckpt_git.sh restore [REV]
#                                          the newest such commit reachable from REV (HEAD) ->
#                                          .gpu-train/ckpt, where gpu_run.sh resumes from
#
# Why not a tracked folder: every device call sends the working tree, at most
# 64 MiB in all; a tracked 28 MB checkpoint beside a 30 MB default model and a
# ~30 MB benchmark pack cannot travel. In history it costs no call anything,
# any clone of main holds it, and the training call carries it (.gpu-train is
# ignored and named in `carry`).
set -eu
cd "$(dirname "$0")/../.."
CK=.gpu-train/ckpt
case "${1:-}" in
save)
    [ -f $CK/state.json ] || { echo "ckpt_git: no $CK/state.json to save" >&2; exit 1; }
    git diff --cached --quiet || { echo "ckpt_git: the index has staged changes: commit them first" >&2; exit 1; }
    step=$(python3 -c 'import json,sys;print(json.load(open(sys.argv[1]))["step"])' $CK/state.json)
    idx=$(mktemp); trap 'rm -f "$idx"' EXIT
    export GIT_INDEX_FILE=$idx
    git read-tree --empty
    for f in $CK/state.json $CK/weights-*.safetensors; do
        git update-index --add --cacheinfo "100644,$(git hash-object -w "$f"),checkpoint/$(basename "$f")"
    done
    tree=$(git write-tree)
    unset GIT_INDEX_FILE
    prev=$(git log --format=%H --grep='^train-ckpt: step' -1 HEAD || true)
    c=$(git commit-tree "$tree" ${prev:+-p "$prev"} -m "train-ckpt: step $step (issue 26; tools/train/ckpt_git.sh restore)")
    git merge -q -s ours --no-ff --allow-unrelated-histories -m "train (issue 26): the step $step checkpoint joins this branch's history; its files do not change (tools/train/ckpt_git.sh restore)" "$c"
    echo "ckpt_git: step $step saved as $c, merged into $(git rev-parse --abbrev-ref HEAD)" ;;
restore)
    c=$(git log --format=%H --grep='^train-ckpt: step' -1 "${2:-HEAD}")
    [ -n "$c" ] || { echo "ckpt_git: no 'train-ckpt: step' commit reachable from ${2:-HEAD}" >&2; exit 1; }
    rm -rf $CK.new; mkdir -p $CK.new
    git archive "$c" checkpoint | tar -x -C $CK.new --strip-components=1
    rm -rf $CK; mv $CK.new $CK
    echo "ckpt_git: $(git log -1 --format=%s "$c") -> $CK"; du -sh $CK ;;
*) echo "usage: ckpt_git.sh save | restore [REV]" >&2; exit 2 ;;
esac
