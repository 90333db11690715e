#!/bin/sh
# The corrections loop as it was run (README.md): score the stand-in on split B val, correct 4 scans with a
# number wrong as a reviewer would, fine-tune with the one command, score again, compare.
# Usage: docs/results/corrections/run_loop.sh STANDIN_CHECKPOINT WORK_DIR   (from the checkout's root)
set -eu
STANDIN=$1 W=$2
HERE=docs/results/corrections
nice -n 10 python tools/test.py $HERE/standin_split_b.yaml --checkpoint "$STANDIN" --split val --out "$W/before" --no-progress
python $HERE/loop.py pick "$W/before/metrics.json" "$W/reviewed" | tee "$W/picked.txt"
nice -n 10 python tools/train.py configs/finetune_corrections.yaml --corrections "$W/reviewed" --out "$W/finetune" \
    --set train.init_from="$STANDIN" --no-progress
nice -n 10 python tools/test.py $HERE/standin_split_b.yaml --checkpoint "$W/finetune/last.pth" --split val --out "$W/after" --no-progress
python $HERE/loop.py compare "$W/before/metrics.json" "$W/after/metrics.json" "$W/reviewed" > "$W/results.md"
cat "$W/results.md"
