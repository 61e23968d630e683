#!/usr/bin/env bash
# device-tree.sh size [CARRY...] | hide | restore
#
# A device call (the `run` tool) sends the checkout as it is on disk: tracked
# files, untracked files git does not ignore, and the ignored paths named in
# `carry`, 64 MiB at most. The built-in default model (models/*.gguf, ~30 MB)
# plus a benchmark pack (~30 MB) or the training checkpoint and corpus (~33 MB)
# is over that, so:
#
#   size [CARRY...]   what would travel, in MiB (the tree, then each carried path)
#   hide              moves models/*.gguf into .git/device-hidden/ (git does not send .git);
#                     a build without it embeds the synthetic tiny model instead
#   restore           puts them back (`git checkout -- models` does too)
set -euo pipefail
cd "$(dirname "$0")/.."
H=.git/device-hidden
case "${1:-}" in
size)
    shift
    tree=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } |
            xargs -0 -r stat -c %s 2>/dev/null | awk '{s+=$1} END {printf "%.1f", s/1048576}' || true)
    # (|| true: a hidden model is still in git's index, so stat fails on it; the sum is of what is on disk)
    echo "tree: $tree MiB"
    total=$tree
    for c in "$@"; do
        m=$(du -sb "$c" | awk '{printf "%.1f", $1/1048576}')
        echo "carry $c: $m MiB"; total=$(awk "BEGIN{print $total+$m}")
    done
    echo "total: $total MiB of 64" ;;
hide)
    mkdir -p $H
    shopt -s nullglob
    for f in models/*.gguf; do mv "$f" $H/; echo "hidden: $f"; done ;;
restore)
    shopt -s nullglob
    mkdir -p models; for f in $H/*.gguf; do mv "$f" models/; echo "restored: models/$(basename "$f")"; done ;;
*) echo "usage: device-tree.sh size [CARRY...] | hide | restore" >&2; exit 2 ;;
esac
