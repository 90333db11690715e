#!/usr/bin/env bash
# Train numbering-recipe networks on a lent GPU within one device call (docs/gpu_runbook.md, "Training on the GPU").
#
#   bash bench/gpu_train.sh prepare                  # HERE: ../shared/data (scans, iosseg) into .gpu_train/
#   bash bench/gpu_train.sh run NAME:CONFIG[:key=value,...] ...   # DEVICE, carry [".gpu_train"]
#   bash bench/gpu_train.sh start NAME:CONFIG[:key=value,...] ... # DEVICE, carry [".gpu_train"]: no probe,
#        # the runs detached (setsid), so they train on after the call returns, on a machine still held
#   bash bench/gpu_train.sh finish NAME ...          # DEVICE, the next call at once: waits, then exports
#   bash bench/gpu_train.sh data                     # DEVICE: the carried data unpacked, the cache filled
#
# 'run' unpacks the data beside the checkout (../shared/data, where the configs look), fills the
# preprocessing cache, then times a probe: every run at once for GPU_TRAIN_PROBE_STEPS steps. From the
# slowest probe's seconds per step it sets the epochs that fit in what is left of GPU_TRAIN_SECONDS
# (at most GPU_TRAIN_MAX_EPOCHS; GPU_TRAIN_EPOCHS fixes them instead, and a run whose own settings name
# train.epochs keeps them, capped to what fits). All runs then train side by side. Each one's
# float16 model file (pointmamba-export-model) and NAME.logs.tar.gz (train.log, metrics.jsonl, its output)
# come back under $OUT. Seeds, data and every other setting are the config's: a CUDA run differs from a
# CPU one only by bf16 autocast (train.amp) and the GPU's arithmetic.
# 'start' and 'finish' are for a schedule longer than one call (run's 600 s) but inside a lease (15 min):
# 'start' returns after GPU_TRAIN_SECONDS with the runs still training; 'finish' (the next call, within the
# 30 s a held machine waits) waits up to its own GPU_TRAIN_SECONDS, stops what still runs, and exports.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CARRY=${GPU_TRAIN_CARRY:-$ROOT/.gpu_train}  # what prepare writes and the device call carries
STATE=${GPU_TRAIN_STATE:-/tmp/pm_gpu_train}
PY=${PYTHON:-python3}
START=$(date +%s)
BUDGET=${GPU_TRAIN_SECONDS:-540}          # the whole call, inside the device's 600 s
PROBE_STEPS=${GPU_TRAIN_PROBE_STEPS:-40}
MAX_EPOCHS=${GPU_TRAIN_MAX_EPOCHS:-84}
MIN_EPOCHS=${GPU_TRAIN_MIN_EPOCHS:-1}     # fewer fit: train nothing (a cut schedule answers no rule)
WORKERS=${GPU_TRAIN_WORKERS:-4}           # DataLoader workers per run (16 cores: 3 runs x 4 + the mains)
EXPORT_S=40                                # export and copy at the end

say() { echo "[gpu_train $(date +%H:%M:%S) +$(( $(date +%s) - START ))s] $*"; }
device_name() { $PY -c 'import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "the CPU")'; }

prepare() {
    local data=${GPU_TRAIN_DATA:-$ROOT/../shared/data}
    [ -d "$data/scans" ] && [ -d "$data/iosseg" ] || { echo "error: $data/scans or $data/iosseg missing" >&2; exit 1; }
    mkdir -p "$CARRY"
    say "packing $data/{scans,iosseg} into .gpu_train/data.tar.xz"
    tar -C "$data" -cf - scans iosseg | xz -6 -T0 > "$CARRY/data.tar.xz"
    du -sh "$CARRY"/* | sed 's/^/  /'
    say "the shipped model (28 MB) must stay behind to fit 64 MiB: move pointmamba/checkpoints/*.pth aside for the call"
}

# train NAME CONFIG SETTINGS... (in the background; pid in $STATE/NAME.pid). GPU_TRAIN_DETACH=1: in a new
# session (setsid), which the device tool leaves running when the call returns
train() {
    local name=$1 config=$2
    shift 2
    rm -rf "${STATE:?}/$name"
    local cmd=(env PYTHONUNBUFFERED=1 OMP_NUM_THREADS=2 "$PY" tools/train.py --config "$config" --work-dir "$STATE/$name"
        --set train.progress=false "data.num_workers=$WORKERS" "$@")
    if [ "${GPU_TRAIN_DETACH:-0}" = 1 ]; then
        (cd "$ROOT" && exec setsid "${cmd[@]}" > "$STATE/$name.out" 2>&1 < /dev/null) &
    else
        # a child of this shell, so that 'wait' returns its exit status
        (cd "$ROOT" && exec "${cmd[@]}" > "$STATE/$name.out" 2>&1) &
    fi
    echo $! > "$STATE/$name.pid"
}

# the data beside the checkout (../shared/data, where the configs look) and the preprocessing cache filled
data_ready() {
    [ -f "$CARRY/data.tar.xz" ] || { echo "error: $CARRY/data.tar.xz missing: run 'prepare' here and carry .gpu_train" >&2; exit 1; }
    mkdir -p "$STATE"
    local data=$ROOT/../shared/data
    say "$($PY -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)') on $(device_name)"
    if [ ! -d "$data/iosseg" ]; then
        mkdir -p "$data" && tar -xJf "$CARRY/data.tar.xz" -C "$data"
    fi
    say "data in $(cd "$data" && pwd): $(ls "$data/scans" | wc -l) + $(ls "$data/iosseg" | wc -l) patients; filling the cache"
    (cd "$ROOT" && $PY -c "
from pointmamba.data.dataset import Teeth3DSDataset
Teeth3DSDataset(['../shared/data/scans', '../shared/data/iosseg'], split='all').prepare(progress=False)")
}

wait_all() {
    local rc=0
    for f in "$STATE"/*.pid; do
        wait "$(cat "$f")" 2>/dev/null || rc=1
        rm -f "$f"
    done
    return $rc
}

# NAME:CONFIG[:key=value,...] specs into the arrays names, configs, settings (the caller declares them)
parse_specs() {
    for spec in "$@"; do
        IFS=: read -r name config extra <<< "$spec"
        names+=("$name"); configs+=("$config"); settings+=("${extra//,/ }")
    done
}

# wait for every run with a pid file until DEADLINE (epoch seconds); then KILL=1 stops what still runs
# (its last.pth is an unfinished schedule) and KILL=0 returns 1 and leaves it training
wait_until() {
    local deadline=$1 kill_late=$2
    while ls "$STATE"/*.pid >/dev/null 2>&1; do
        for f in "$STATE"/*.pid; do kill -0 "$(cat "$f")" 2>/dev/null || rm -f "$f"; done
        if [ "$(date +%s)" -ge "$deadline" ] && ls "$STATE"/*.pid >/dev/null 2>&1; then
            [ "$kill_late" = 1 ] || return 1
            say "deadline: stopping what still runs (its last.pth is an unfinished schedule)"
            for f in "$STATE"/*.pid; do kill "$(cat "$f")" 2>/dev/null || true; rm -f "$f"; done
            sleep 3
        fi
        sleep 5
    done
}

# each run's logs and float16 model into $OUT
export_runs() {
    local out=${OUT:-$STATE/out}
    mkdir -p "$out"
    for n in "$@"; do
        tail -3 "$STATE/$n/train.log" 2>/dev/null | sed "s/^/  $n: /" || true
        # one archive of logs a run: at most 8 files come back from a call
        mkdir -p "$STATE/logs_$n"
        cp "$STATE/$n/train.log" "$STATE/$n/metrics.jsonl" "$STATE/logs_$n/" 2>/dev/null || true
        tail -c 200000 "$STATE/$n.out" > "$STATE/logs_$n/$n.out" 2>/dev/null || true
        tar -C "$STATE/logs_$n" -czf "$out/$n.logs.tar.gz" . 2>/dev/null || true
        if [ -f "$STATE/$n/last.pth" ]; then
            (cd "$ROOT" && $PY -m pointmamba.cli.export_model "$STATE/$n/last.pth" --out "$out/$n.pth" \
                --note "bench/gpu_train.sh on $(device_name)") \
                || say "$n: export failed"
        fi
    done
    ls -la "$out"
}

run() {
    [ $# -ge 1 ] || { echo "usage: bash bench/gpu_train.sh run NAME:CONFIG[:key=value,...] ..." >&2; exit 2; }
    data_ready
    local names=() configs=() settings=()
    parse_specs "$@"

    say "probe: ${#names[@]} run(s) side by side, $PROBE_STEPS steps each"
    for i in "${!names[@]}"; do
        # shellcheck disable=SC2086
        train "probe_${names[$i]}" "${configs[$i]}" ${settings[$i]} train.epochs=1 \
            "train.max_steps_per_epoch=$PROBE_STEPS" train.val_interval=0
    done
    wait_all || { tail -30 "$STATE"/probe_*.out; exit 1; }
    local left=$(( BUDGET - ($(date +%s) - START) - EXPORT_S - 20 ))
    local s_step steps fit
    read -r s_step steps fit <<< "$($PY "$ROOT/bench/gpu_train_fit.py" "$STATE" "$PROBE_STEPS" "$left" "${names[@]}")"
    [ -n "$fit" ] || { echo "error: no timing from the probes in $STATE" >&2; exit 1; }
    say "probe: $s_step s/step side by side, $steps steps/epoch, ${left}s left: $fit epochs fit"
    if [ "$fit" -lt "$MIN_EPOCHS" ]; then
        say "fewer than GPU_TRAIN_MIN_EPOCHS=$MIN_EPOCHS fit: nothing trained (the call's time is left for other work)"
        return 0
    fi
    local epochs=${GPU_TRAIN_EPOCHS:-$(( fit < MAX_EPOCHS ? fit : MAX_EPOCHS ))}
    for i in "${!names[@]}"; do
        local own e=$epochs
        own=$(grep -o 'train\.epochs=[0-9]*' <<< "${settings[$i]}" | cut -d= -f2 || true)
        [ -n "$own" ] && e=$(( own < fit ? own : fit ))
        local s=${settings[$i]//train.epochs=$own/}
        say "${names[$i]}: ${configs[$i]} $s train.epochs=$e"
        # shellcheck disable=SC2086
        train "${names[$i]}" "${configs[$i]}" $s "train.epochs=$e"
    done
    wait_until $(( START + BUDGET - EXPORT_S )) 1
    export_runs "${names[@]}"
    say "done"
}

# the runs as their settings say (no probe, no epochs fitted), detached; returns when they end or after
# GPU_TRAIN_SECONDS with them still training (then 'finish NAME ...' in the next call)
start() {
    [ $# -ge 1 ] || { echo "usage: bash bench/gpu_train.sh start NAME:CONFIG[:key=value,...] ..." >&2; exit 2; }
    data_ready
    local names=() configs=() settings=()
    parse_specs "$@"
    for i in "${!names[@]}"; do
        say "${names[$i]}: ${configs[$i]} ${settings[$i]} (detached)"
        # shellcheck disable=SC2086
        GPU_TRAIN_DETACH=1 train "${names[$i]}" "${configs[$i]}" ${settings[$i]}
    done
    if wait_until $(( START + BUDGET - EXPORT_S )) 0; then
        export_runs "${names[@]}"
        say "done"
    else
        for n in "${names[@]}"; do tail -1 "$STATE/$n/train.log" 2>/dev/null | sed "s/^/  $n: /" || true; done
        say "still training: call 'finish ${names[*]}' next, within the 30 s a held machine waits"
    fi
}

finish() {
    [ $# -ge 1 ] || { echo "usage: bash bench/gpu_train.sh finish NAME ..." >&2; exit 2; }
    local n
    for n in "$@"; do [ -d "$STATE/$n" ] || { echo "error: $STATE/$n missing: the machine was given back, or no 'start' named $n" >&2; exit 1; }; done
    wait_until $(( START + BUDGET - EXPORT_S )) 1
    export_runs "$@"
    say "done"
}

case "${1:-}" in
    prepare) prepare ;;
    run) shift; run "$@" ;;
    data) data_ready ;;  # for bench/gpu_session.sh's calls that train nothing
    start) shift; start "$@" ;;
    finish) shift; finish "$@" ;;
    *) echo "usage: bash bench/gpu_train.sh prepare | data | run|start NAME:CONFIG[:key=value,...] ... | finish NAME ..." >&2; exit 2 ;;
esac
