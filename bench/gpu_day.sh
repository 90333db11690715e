#!/usr/bin/env bash
# The GPU day (issue 23, Part 2) in steps that need no thinking; docs/gpu_runbook.md says when to run each.
#
#   bash bench/gpu_day.sh prepare     # HERE (CPU machine, package registry reachable): sdists, wheels and
#                                     #   a few shared scans into .gpu_day/ (ignored by git, carried to the device)
#   bash bench/gpu_day.sh start       # DEVICE call 1: install the pure wheels and gco-wrapper, start the
#                                     #   mamba-ssm + causal-conv1d build (sm_90, MAX_JOBS=16) and gpu_check
#                                     #   with the torch-native backends, both in the background (setsid)
#   bash bench/gpu_day.sh extensions  # DEVICE call 2, right after: spconv, wait for the build, install it,
#                                     #   then gpu_check again for the extensions' rows
#   bash bench/gpu_day.sh wait        # DEVICE call 3 if 2 ran out of time: wait and collect
#
# Device steps return within GPU_DAY_SECONDS (default 540 s, inside run's 600 s limit) whether or not the
# background work is done, and copy what exists (JSON, logs) to $OUT. Background work survives between
# calls only while the machine stays held (30 s idle): make the next call at once.
set -euo pipefail

MAMBA_VERSION=2.3.2.post1     # PyPI: source only, builds against the local torch
CAUSAL_VERSION=1.7.0          # PyPI: source only
GCO_VERSION=3.0.9             # PyPI: binary wheels up to cp311 only; the device's Python 3.12 builds the sdist
SPCONV=spconv-cu126==2.3.8    # its wheel bundles the CUDA 12.6 runtime (libcudart); cumm's also libnvrtc
CUMM=cumm-cu126==0.7.11       # spconv-cu126 2.3.8 wants cumm-cu126 >=0.7.11,<0.8.0
PURE_WHEELS="plyfile==1.1.5 pccm==0.4.16 ccimport==0.4.4 fire==0.7.1 lark termcolor"  # not in the device image
BINARY_WHEELS="PyMaxflow==1.3.2"  # the cut's fine pass (inference/expansion.py); cp312 wheel, not in the image
ARCH=${GPU_DAY_ARCH:-90}      # H100 / H200 (sm_90)
ARCH_LIST=${GPU_DAY_ARCH_LIST:-9.0}
PY=${PYTHON:-python3}

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CARRY=$ROOT/.gpu_day
STATE=${GPU_DAY_STATE:-/tmp/pm_gpu_day}   # on the device; survives between calls on a held machine
SITE=$STATE/site
BUILD=$STATE/build
RESULTS=$STATE/results
DEADLINE=$(( $(date +%s) + ${GPU_DAY_SECONDS:-540} ))
DEVICE_WHEEL_TAGS="--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
  --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64"

say() { echo "[gpu_day $(date +%H:%M:%S)] $*"; }

prepare() {
    local venv=$ROOT/.venv/bin
    [ -x "$venv/pip" ] || { echo "error: $venv/pip missing: run make install first" >&2; exit 1; }
    rm -rf "$CARRY" && mkdir -p "$CARRY/pkgs" "$CARRY/spconv" "$CARRY/scans"
    say "sdists of mamba-ssm $MAMBA_VERSION and causal-conv1d $CAUSAL_VERSION (their metadata step imports torch and wheel)"
    "$venv/pip" install -q wheel
    MAMBA_SKIP_CUDA_BUILD=TRUE CAUSAL_CONV1D_SKIP_CUDA_BUILD=TRUE "$venv/pip" download -q --no-binary :all: --no-deps \
        --no-build-isolation -d "$CARRY/pkgs" "mamba-ssm==$MAMBA_VERSION" "causal-conv1d==$CAUSAL_VERSION"
    say "sdist of gco-wrapper $GCO_VERSION"
    "$venv/pip" download -q --no-deps --no-binary gco-wrapper -d "$CARRY/pkgs" "gco-wrapper==$GCO_VERSION"
    say "pure wheels: $PURE_WHEELS"
    # shellcheck disable=SC2086
    "$venv/pip" download -q --no-deps $DEVICE_WHEEL_TAGS -d "$CARRY/pkgs" $PURE_WHEELS
    say "binary wheels for the device's Python 3.12: $BINARY_WHEELS"
    # shellcheck disable=SC2086
    "$venv/pip" download -q --no-deps $DEVICE_WHEEL_TAGS -d "$CARRY/pkgs" $BINARY_WHEELS
    # a call carries 64 MiB with the working tree: the spconv wheel alone is 70 MB. Each wheel is unpacked
    # (a wheel's files are its installed tree) and packed as .tar.xz (-9: spconv 22 MB, cumm 18 MB), cumm
    # with call 1's packages, spconv alone with call 2.
    local tmp
    tmp=$(mktemp -d)
    for spec in "$CUMM:pkgs/cumm-site" "$SPCONV:spconv/spconv-site"; do
        say "${spec%%:*}: download, unpack, xz -9 into .gpu_day/${spec#*:}.tar.xz"
        rm -rf "$tmp/wheels" "$tmp/site" && mkdir -p "$tmp/site"
        # shellcheck disable=SC2086
        "$venv/pip" download -q --no-deps $DEVICE_WHEEL_TAGS -d "$tmp/wheels" "${spec%%:*}"
        (cd "$tmp/site" && unzip -q "$tmp"/wheels/*.whl)
        tar -C "$tmp/site" -cf - . | xz -9 -T0 > "$CARRY/${spec#*:}.tar.xz"
    done
    rm -rf "$tmp"
    local scans=${GPU_DAY_SCANS:-$ROOT/../shared/data/scans}
    if [ -d "$scans" ]; then
        # four scans: with the working tree (41 MB) and pkgs (20 MB) call 1 fits in 64 MiB
        say "scans MSN001-MSN003 (training) and MSN021 (held out) from $scans"
        for id in MSN001 MSN002 MSN003 MSN021; do
            cp -r "$scans/$id" "$CARRY/scans/"
        done
        chmod -R u+w "$CARRY/scans"
    else
        say "no scans at $scans (set GPU_DAY_SCANS=DIR): gpu_check will train on synthetic jaws"
    fi
    du -sh "$CARRY"/* | sed 's/^/  /'
    say "carry [\".gpu_day/pkgs\", \".gpu_day/scans\"] with 'start' and [\".gpu_day/spconv\"] with 'extensions'"
}

# A job is running while its pid file exists and its .rc file does not. Not kill -0 on the pid: each device
# call may run in its own pid namespace, where a job started by an earlier call is invisible though alive
# (seen on the first GPU day: 'extensions' took the causal-conv1d build for finished and went on without it).
running() { [ -f "$1" ] && [ ! -f "${1%.pid}.rc" ]; }

# wait until none of the given pid files names a running job, or the deadline
wait_for() {
    while :; do
        local busy=""
        for f in "$@"; do running "$f" && busy="$busy $(basename "$f" .pid)"; done
        [ -z "$busy" ] && return 0
        [ "$(date +%s)" -ge "$DEADLINE" ] && { say "still running:$busy (call 'wait' next)"; return 1; }
        sleep 10
    done
}

collect() {
    {
        date
        for f in "$STATE"/*.rc; do [ -f "$f" ] && echo "$(basename "$f" .rc): exit $(cat "$f")"; done
        for f in "$STATE"/*.pid; do running "$f" && echo "$(basename "$f" .pid): running"; done
        nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv 2>/dev/null || true
    } > "$STATE/status.txt"
    cat "$STATE/status.txt"
    [ -n "${OUT:-}" ] || return 0
    cp "$STATE/status.txt" "$OUT/"
    for f in "$RESULTS"/*.json; do [ -f "$f" ] && cp "$f" "$OUT/"; done
    for f in "$STATE"/logs/*.log; do [ -f "$f" ] && tail -c 4000000 "$f" > "$OUT/$(basename "$f")"; done
    return 0
}

# gpu_check in the background: name, then its arguments
check_in_background() {
    local name=$1
    shift
    say "gpu_check ($name) in the background: $*"
    rm -f "$STATE/check_$name.rc"  # a rerun's job is running until it writes its own
    (cd "$ROOT" && PYTHONPATH=$SITE PYTHONUNBUFFERED=1 setsid nohup \
        bash -c "$PY bench/gpu_check.py --json $RESULTS/gpu_check_$name.json --work-dir $STATE/work_$name $*; echo \$? > $STATE/check_$name.rc" \
        > "$STATE/logs/check_$name.log" 2>&1 < /dev/null & echo $! > "$STATE/check_$name.pid")
}

start() {
    [ -d "$CARRY/pkgs" ] || { echo "error: $CARRY/pkgs missing: run 'prepare' here and carry .gpu_day/pkgs" >&2; exit 1; }
    mkdir -p "$SITE" "$BUILD/src" "$BUILD/wheels" "$RESULTS" "$STATE/logs"
    cp -r "$CARRY/pkgs" "$STATE/"
    [ -d "$CARRY/scans" ] && cp -r "$CARRY/scans" "$STATE/"
    say "$($PY -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name(0))')"
    say "nvcc: $(nvcc --version | tail -1)"
    say "pure wheels and gco-wrapper (built from its sdist: Cython + the C++ compiler) into $SITE"
    $PY -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$SITE" "$STATE"/pkgs/*.whl
    $PY -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target "$SITE" "$STATE"/pkgs/gco?wrapper-*.tar.gz
    tar -xJf "$STATE/pkgs/cumm-site.tar.xz" -C "$SITE"  # spconv's runtime half (spconv itself comes with call 2)
    PYTHONPATH=$SITE $PY -c "import gco, maxflow, plyfile; print('gco, maxflow and plyfile import')"

    say "mamba-ssm and causal-conv1d for sm_$ARCH only, MAX_JOBS=16, in the background (logs/build_*.log)"
    for pkg in "mamba_ssm-$MAMBA_VERSION" "causal_conv1d-$CAUSAL_VERSION"; do
        tar -xzf "$STATE"/pkgs/"$pkg".tar.gz -C "$BUILD/src"
        $PY "$ROOT/bench/gpu_build.py" one-arch "$BUILD/src/$pkg/setup.py" --arch "$ARCH"
        local name=${pkg%%-*}
        (cd "$BUILD/src/$pkg" && TORCH_CUDA_ARCH_LIST=$ARCH_LIST MAX_JOBS=16 MAMBA_FORCE_BUILD=TRUE \
            CAUSAL_CONV1D_FORCE_BUILD=TRUE setsid nohup bash -c \
            "$PY -m pip wheel -v --no-build-isolation --no-deps --no-index -w $BUILD/wheels .; echo \$? > $STATE/build_$name.rc" \
            > "$STATE/logs/build_$name.log" 2>&1 < /dev/null & echo $! > "$STATE/build_$name.pid")
    done

    # cpu-torch (the CPU's torch backends against numba) needs no GPU: the test suite measures it
    check_in_background torch --where cpu-auto cuda-torch cuda-triton cuda-ext --scans "$STATE/scans"
    wait_for "$STATE/check_torch.pid" || true
    collect
}

extensions() {
    [ -d "$STATE/site" ] || { echo "error: $STATE missing: 'start' has not run on this machine (a fresh one?)" >&2; exit 1; }
    if [ -d "$SITE/spconv" ]; then
        say "spconv is in $SITE already"
    elif [ -f "$CARRY/spconv/spconv-site.tar.xz" ]; then
        say "spconv into $SITE (cumm is there since 'start')"
        tar -xJf "$CARRY/spconv/spconv-site.tar.xz" -C "$SITE"
    else
        say "no .gpu_day/spconv carried: the sparse conv stays on the torch rulebook"
    fi
    say "waiting for the build"
    wait_for "$STATE/build_mamba_ssm.pid" "$STATE/build_causal_conv1d.pid" || { collect; return 0; }
    for name in mamba_ssm causal_conv1d; do say "build $name: exit $(cat "$STATE/build_$name.rc" 2>/dev/null || echo '?')"; done
    ls "$BUILD"/wheels/*.whl >/dev/null 2>&1 && \
        $PY -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$SITE" "$BUILD"/wheels/*.whl
    PYTHONPATH=$SITE $PY - <<'EOF' || true
for name in ("mamba_ssm.ops.selective_scan_interface", "causal_conv1d", "spconv.pytorch"):
    try:
        __import__(name)
        print(f"{name}: imports")
    except Exception as exc:  # noqa: BLE001
        print(f"{name}: {type(exc).__name__}: {exc}")
EOF
    say "waiting for the torch-native check to finish (one check at a time on the GPU)"
    wait_for "$STATE/check_torch.pid" || { collect; return 0; }
    # GPU_DAY_EXT_SECTIONS (e.g. "backends agreement speed") shortens this check where device time is short
    check_in_background ext --where cuda-ext --scans "$STATE/scans" ${GPU_DAY_EXT_SECTIONS:+--sections $GPU_DAY_EXT_SECTIONS}
    wait_for "$STATE/check_ext.pid" || true
    collect
}

wait_step() {
    [ -d "$STATE" ] || { echo "error: $STATE missing: nothing was started on this machine" >&2; exit 1; }
    if [ ! -f "$STATE/check_ext.pid" ]; then
        say "the extensions' check has not started: running 'extensions'"
        extensions
        return 0
    fi
    wait_for "$STATE"/*.pid || true
    collect
}

case "${1:-}" in
    prepare) prepare ;;
    start) start ;;
    extensions) extensions ;;
    wait) wait_step ;;
    *) echo "usage: bash bench/gpu_day.sh prepare | start | extensions | wait (see docs/gpu_runbook.md)" >&2; exit 2 ;;
esac
