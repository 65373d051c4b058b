#!/usr/bin/env bash
# The prepared GPU check, one command on the GPU machine (device tool: carry [".whl"], timeout 600):
#
#     bash benchmarks/gpu/run.sh
#
# 1. installs the carried wheels (.whl/*.whl, from benchmarks/gpu/wheels.sh) into a temporary target
#    and puts it and the tree on PYTHONPATH (workbench runs from the tree, not installed);
# 2. imports every workbench module (the result goes into summary.json);
# 3. runs each section in its own process under `timeout`, each writing $OUT/<section>.json
#    (status, reason, seconds, the steps it reached, its results, versions, the tail of its output):
#      gpu_check         benchmarks/gpu_check.py: L2-flushed timing, wb.profile on CUDA, CUDA-graph and compiled decisions
#      gpu_tests         the tests marked `gpu`
#      gpuprofile_cells  ten consecutive %%gpuprofile cells in one IPython shell
#      triton_kernels    a fused Triton kernel forward and backward against eager, do_bench-timed; workbench.kernels
#      memory            allocator history + snapshot; wb.profile(..., memory=True) where built
#      critical_path     traces recorded on CUDA; Trace.critical_path where built
#      report            (optional: wheels.sh --report) the demo report end to end on CUDA
#    a section that fails does not stop the next one;
# 4. writes $OUT/summary.json (8 files in all: the device tool brings back at most 8).
#
# Exit status: 0 when every section ran; on a machine without CUDA "not applicable: no CUDA device"
# counts as ran (the dry run, benchmarks/gpu/dry_run.sh). Where nvidia-smi sees a GPU (or
# WB_GPU_REQUIRE_CUDA=1) a section that finds no CUDA fails too. 1 when any failed, timed out or crashed.
#
# Settings (environment): OUT (default benchmarks/out/gpu), PYTHON (default python3),
# WB_GPU_SECTIONS="gpu_check memory ..." (a subset, in that order), WB_GPU_DEADLINE_S (default 400, about
# 6.5 minutes: sections are cut short or not started so that the summary is written before it), WB_GPU_LIMIT_<section>=SECONDS,
# WB_GPU_SKIP_IMPORTS=1, WB_GPU_REQUIRE_CUDA=0|1, WB_GPU_WHEEL_DIR (default .whl),
# WB_GPU_REHEARSE=1 (sections.py: run the code after each gate on CPU tensors, to catch slips before the device).
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT"
PY=${PYTHON:-python3}
OUT=${OUT:-$ROOT/benchmarks/out/gpu}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/wb-gpu.XXXXXX")
START=$(date +%s)
DEADLINE=${WB_GPU_DEADLINE_S:-400}
SECTIONS=${WB_GPU_SECTIONS:-"gpu_check gpu_tests gpuprofile_cells triton_kernels memory critical_path report"}

declare -A LIMIT=([gpu_check]=150 [gpu_tests]=75 [gpuprofile_cells]=50 [triton_kernels]=60 [memory]=30
                  [critical_path]=35 [report]=150)

elapsed() { echo $(( $(date +%s) - START )); }
log() { echo "[run.sh $(elapsed)s] $*"; }

# ---- 1. the carried wheels
WHEELS=none
WHEEL_DIR=${WB_GPU_WHEEL_DIR:-.whl}
SITE="$WORK/site"
shopt -s nullglob
wheels=("$WHEEL_DIR"/*.whl)
shopt -u nullglob
if (( ${#wheels[@]} )); then
    if "$PY" -m pip --version >/dev/null 2>&1; then
        if "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check \
                --target "$SITE" "${wheels[@]}" >"$WORK/pip.log" 2>&1; then
            WHEELS="installed ${#wheels[@]} wheels with pip"
        else
            WHEELS="failed: $(tail -c 400 "$WORK/pip.log" | tr '\n"' ' ')"
            rm -rf "$SITE"
        fi
    elif "$PY" -c 'import sys, zipfile
for w in sys.argv[2:]: zipfile.ZipFile(w).extractall(sys.argv[1])' "$SITE" "${wheels[@]}" >"$WORK/pip.log" 2>&1; then
        WHEELS="unpacked ${#wheels[@]} wheels (no pip)"
    else
        WHEELS="failed: $(tail -c 400 "$WORK/pip.log" | tr '\n"' ' ')"
        rm -rf "$SITE"
    fi
fi
PP="$ROOT"
[ -d "$SITE" ] && PP="$PP:$SITE"
export PYTHONPATH="$PP${PYTHONPATH:+:$PYTHONPATH}"
# data files of the wheels (nbconvert's templates) land in $SITE/share/jupyter: jupyter finds them there
[ -d "$SITE/share/jupyter" ] && export JUPYTER_PATH="$SITE/share/jupyter${JUPYTER_PATH:+:$JUPYTER_PATH}"
export WB_GPU_OUT="$OUT" WB_GPU_WORK="$WORK" WB_GPU_WHEEL_DIR="$WHEEL_DIR" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export WORKBENCH_CACHE_DIR="$WORK/cache" WORKBENCH_HISTORY="$WORK/history.jsonl"
export MPLBACKEND=Agg
log "python: $("$PY" -c 'import sys; print(sys.version.split()[0], sys.executable)' 2>&1); wheels: $WHEELS"

# ---- 2. every module imported
if [ "${WB_GPU_SKIP_IMPORTS:-0}" != 1 ]; then
    timeout -k 5 90 "$PY" "$HERE/sections.py" imports >"$WORK/imports.log" 2>&1
    log "imports (rc $?): $(head -c 400 "$WORK/imports.log" | tr '\n' ' ')"
fi

# ---- 3. the sections
for name in $SECTIONS; do
    limit_var="WB_GPU_LIMIT_$name"
    limit=${!limit_var:-${LIMIT[$name]:-60}}
    left=$(( DEADLINE - $(elapsed) - 15 ))
    (( limit > left )) && limit=$left
    if (( limit < 10 )); then
        "$PY" "$HERE/sections.py" finalize "$name" --rc 124 --limit 0 \
            --reason "not started: the run's deadline of ${DEADLINE} s was reached" \
            || printf '{"section": "%s", "status": "timeout", "reason": "not started: deadline"}\n' "$name" >"$OUT/$name.json"
        log "$name: not started (deadline)"
        continue
    fi
    t0=$(date +%s.%N)
    timeout -k 10 "$limit" "$PY" "$HERE/sections.py" run "$name" --limit "$limit" >"$WORK/$name.log" 2>&1
    rc=$?
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}')
    "$PY" "$HERE/sections.py" finalize "$name" --rc "$rc" --log "$WORK/$name.log" --seconds "$secs" --limit "$limit" \
        || printf '{"section": "%s", "status": "crashed", "rc": %d, "reason": "finalize failed"}\n' "$name" "$rc" >"$OUT/$name.json"
    log "$name (rc $rc, ${secs}s): $(tail -n 1 "$WORK/$name.log" | head -c 300)"
done

# ---- 4. the summary; its exit status is this script's
"$PY" "$HERE/sections.py" summary --wheels "$WHEELS" --total-seconds "$(elapsed)" --sections "$SECTIONS"
status=$?
if [ ! -s "$OUT/summary.json" ]; then
    printf '{"exit_status": 1, "reason": "the summary step failed (rc %d)", "wheels": "%s"}\n' "$status" "$WHEELS" >"$OUT/summary.json"
    status=1
fi
log "done: exit $status; artifacts (not brought back) in $WORK"
exit "$status"
