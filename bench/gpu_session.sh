#!/usr/bin/env bash
# A 15-minute GPU session with nothing to compile (issue 45), in two device calls; docs/gpu_runbook.md.
#
#   bash bench/gpu_session.sh prepare                 # HERE: wheels + data into .gpu_train/ (ignored by git)
#   bash bench/gpu_session.sh train NAME:CONFIG[:k=v,...] ...   # DEVICE call 1, carry [".gpu_train"], the
#        # shipped model moved aside (64 MiB): the recipe's step taken apart per sparse-conv backend
#        # (bench/train_step.py), then bench/gpu_train.sh with what is left of GPU_SESSION_SECONDS
#   bash bench/gpu_session.sh check                   # DEVICE call 2, carry [".gpu_train/whl"] (the data
#        # would not fit beside the model), the shipped model back: gpu_check's Triton rows, every section
#        # (GPU_SESSION_SPARSE_CONV=torch to check the rulebook conv instead of the gathered one)
#   bash bench/gpu_session.sh start NAME:CONFIG[:k=v,...] ...   # DEVICE, carry [".gpu_train"]: the runs as
#        # their settings say, detached, so they train on across calls of one lease (bench/gpu_train.sh start)
#   bash bench/gpu_session.sh finish NAME ...         # DEVICE, the next call at once: wait, export
#   bash bench/gpu_session.sh amp                     # DEVICE call 0, carry [".gpu_train"]: bf16 autocast
#        # against float32 on the recipe's step, ABBA, and the pre-registered rule's verdict (gpu log)
#
# Everything lands in $OUT; each step has its own timeout so the call returns inside run's 600 s.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CARRY=$ROOT/.gpu_train
PY=${PYTHON:-python3}
START=$(date +%s)
BUDGET=${GPU_SESSION_SECONDS:-560}
OUTDIR=${OUT:-/tmp/pm_gpu_session}

say() { echo "[gpu_session $(date +%H:%M:%S) +$(( $(date +%s) - START ))s] $*"; }
left() { echo $(( BUDGET - ($(date +%s) - START) )); }

prepare() {
    mkdir -p "$CARRY/whl"
    local tags="--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_17_x86_64
        --platform manylinux2014_x86_64 --platform any"
    # shellcheck disable=SC2086
    $PY -m pip download -q --no-deps $tags -d "$CARRY/whl" PyMaxflow==1.3.2 plyfile==1.1.5
    # no cp312 wheel of gco-wrapper: its sdist builds on the device with the image's Cython, in seconds
    $PY -m pip download -q --no-deps --no-binary gco-wrapper -d "$CARRY/whl" gco-wrapper==3.0.9
    bash "$ROOT/bench/gpu_train.sh" prepare
    du -sh "$CARRY"/* | sed 's/^/  /'
}

deps() {
    $PY -m pip install -q --no-index --no-deps --no-build-isolation --target /tmp/pm_site "$CARRY"/whl/*.whl \
        "$CARRY"/whl/gco-wrapper-*.tar.gz 2>&1 | tail -2
    export PYTHONPATH=/tmp/pm_site${PYTHONPATH:+:$PYTHONPATH}
    $PY -c "import gco, maxflow, plyfile, torch, triton; print('deps: torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))"
}

# the recipe's step taken apart per sparse-conv backend, in the order A B B A (the first row measured slower
# on 2026-11-28: gather 1.27x with the rulebook first, 1.06x with gather first); auto on CUDA takes gather
measure() {
    (cd "$ROOT" && timeout 200 $PY bench/train_step.py --backends torch gather gather torch --steps 12 \
        --json "$OUTDIR/train_step.json") > "$OUTDIR/train_step.log" 2>&1
    # what tools/train.py adds to a step (its probe measured 0.386 s where the bare step took 0.256 s)
    (cd "$ROOT" && timeout 120 $PY bench/train_step.py --backends gather --trainer --steps 12 \
        --json "$OUTDIR/train_step_trainer.json") >> "$OUTDIR/train_step.log" 2>&1
    grep spconv= "$OUTDIR/train_step.log"
    # one archive: at most 8 files come back from a call (the models and each run's logs come after)
    (cd "$OUTDIR" && tar -czf measure.tar.gz train_step.* 2>/dev/null && rm -f train_step.*)
}

# the carried scans beside the checkout (../shared/data, where the configs look), as gpu_train.sh unpacks them
data() {
    bash "$ROOT/bench/gpu_train.sh" data || exit 1
}

# bf16 autocast against float32, rows A B B A (docs/results/gpu/log.md, "The sixth session's pre-registered
# measurement"): float32 trains the GPU recipe if its mean step is at most 0.90x bf16's
amp() {
    mkdir -p "$OUTDIR"
    deps
    data
    (cd "$ROOT" && timeout $(( $(left) - 10 )) $PY bench/train_step.py --backends gather --amp on off off on \
        --steps "${GPU_SESSION_AMP_STEPS:-12}" --json "$OUTDIR/amp.json") > "$OUTDIR/amp.log" 2>&1
    grep -E "spconv=|verdict:|Error" "$OUTDIR/amp.log"
}

train() {
    [ $# -ge 1 ] || { echo "usage: bash bench/gpu_session.sh train NAME:CONFIG[:k=v,...] ..." >&2; exit 2; }
    mkdir -p "$OUTDIR"
    deps
    data
    measure
    say "training; $(left) s left"
    # the recipe's 28 epochs or nothing (GPU_SESSION_MIN_EPOCHS): a cut schedule answers no rule, and the
    # device time it would take goes to the check call instead
    GPU_TRAIN_SECONDS=$(( $(left) - 10 )) \
        GPU_TRAIN_MIN_EPOCHS=${GPU_SESSION_MIN_EPOCHS:-28} bash "$ROOT/bench/gpu_train.sh" run "$@"
}

check() {
    mkdir -p "$OUTDIR"
    deps
    (cd "$ROOT" && timeout $(( $(left) - 15 )) $PY bench/gpu_check.py --where cuda-triton \
        --triton-sparse-conv "${GPU_SESSION_SPARSE_CONV:-gather}" --json "$OUTDIR/gpu_check_triton.json") 2>&1 | tee "$OUTDIR/gpu_check_triton.log" | tail -40
}

case "${1:-}" in
    prepare) prepare ;;
    train) shift; train "$@" ;;
    check) check ;;
    amp) amp ;;
    start|finish) deps; GPU_TRAIN_SECONDS=$(left) bash "$ROOT/bench/gpu_train.sh" "$@" ;;  # what deps left
    *) echo "usage: bash bench/gpu_session.sh prepare | train|start NAME:CONFIG[:k=v,...] ... | finish NAME ... | check | amp" >&2; exit 2 ;;
esac
