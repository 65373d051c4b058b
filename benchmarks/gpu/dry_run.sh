#!/usr/bin/env bash
# The GPU check's dry run on a CPU machine: a Python 3.12 venv holding torch 2.11 and only the GPU
# image's other packages, plus the carried wheels, runs benchmarks/gpu/run.sh to its "no CUDA device"
# exits (every section reaching its first CUDA call), then a subset of the suite under that torch.
#
#     bash benchmarks/gpu/dry_run.sh              # venv (first time: ~3 min, ~5 GB), wheels.sh --report, run.sh, suite subset
#     bash benchmarks/gpu/dry_run.sh --no-suite   # run.sh only
#
# torch 2.11.0 from the registry is the CUDA 13 build the device has (with its nvidia-* wheels): on a
# machine with no driver it imports and says torch.cuda.is_available() is False, as a CPU build would.
# Settings: DRY_VENV (default /tmp/wb-dry-venv), OUT (default /tmp/gpu-dry), PYTHON312 (the interpreter),
# DRY_WHEELS=core (fetch only the core wheels: the report section then says "skipped").
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT"
VENV=${DRY_VENV:-/tmp/wb-dry-venv}
export OUT=${OUT:-/tmp/gpu-dry}
SUITE=1
[ "${1:-}" = "--no-suite" ] && SUITE=0
# The image's packages that the check uses (KINDS.md's list; numpy, torch, triton at the image's versions)
IMAGE_PACKAGES=(torch==2.11.0 triton==3.6.0 numpy==2.5.2 pandas pyarrow pytest pytest-timeout hypothesis rich
                psutil packaging jinja2 markupsafe attrs pyyaml tqdm requests click narwhals typing-extensions
                python-dateutil pygments)

find_py312() {
    for c in "${PYTHON312:-}" python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3.12 /usr/local/bin/python3.12 /usr/bin/python3.12; do
        [ -n "$c" ] && "$c" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null && { echo "$c"; return 0; }
    done
    return 1
}

if [ ! -f "$VENV/.dry-run-ready" ]; then
    PY312=$(find_py312) || { echo "dry_run.sh: no Python 3.12 interpreter found (set PYTHON312)" >&2; exit 2; }
    echo "building $VENV with $PY312: ${IMAGE_PACKAGES[*]}"
    rm -rf "$VENV"
    "$PY312" -m venv "$VENV" || exit 2
    "$VENV/bin/python" -m pip install -q "${IMAGE_PACKAGES[@]}" 2> >(grep -v "is ignored: it is neither" >&2) || exit 2
    touch "$VENV/.dry-run-ready"
fi
"$VENV/bin/python" -c 'import sys, torch; print("dry-run venv: Python", sys.version.split()[0], "torch", torch.__version__,
      "cuda available:", torch.cuda.is_available())'
for absent in msgspec IPython altair papermill; do
    if "$VENV/bin/python" -c "import $absent" 2>/dev/null; then
        echo "dry_run.sh: $absent is installed in $VENV, but the GPU image lacks it: rebuild the venv" >&2; exit 2
    fi
done

if [ "${DRY_WHEELS:-report}" = core ]; then bash "$HERE/wheels.sh"; else bash "$HERE/wheels.sh" --report; fi || exit 2

rm -rf "$OUT"
PYTHON="$VENV/bin/python" bash "$HERE/run.sh"
status=$?
echo "run.sh exit status: $status; $OUT holds: $(ls "$OUT" | tr '\n' ' ')"

if [ "$SUITE" = 1 ]; then
    # The suite's imports and a subset of it under torch 2.11 / Python 3.12, with the carried wheels on the
    # path as on the device (no altair, ipywidgets, papermill: tests that need them skip or are left out).
    SITE=$(mktemp -d /tmp/wb-dry-site.XXXXXX)
    "$VENV/bin/python" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .whl/*.whl || exit 2
    export PYTHONPATH="$ROOT:$SITE"
    "$VENV/bin/python" -m pytest -q -p no:cacheprovider -x --timeout 300 \
        tests/test_measurement.py tests/test_packaging.py \
        tests/trace/test_classify.py tests/trace/test_nesting_and_columns.py tests/trace/test_load_real.py \
        tests/analysis/test_results_and_work.py tests/hypotheses/test_rules_fire.py \
        tests/capture/test_gpu_check_script.py tests/capture/test_gpu_paths.py tests/capture/test_gpu_run_script.py \
        tests/capture/test_profile_callable.py tests/capture/test_clean_timing.py \
        tests/variants/test_timing.py tests/variants/test_cuda_graph_and_registry.py tests/variants/test_output_check.py \
        tests/magics/test_gpuprofile.py
    suite=$?
    rm -rf "$SITE"
    echo "suite subset under torch 2.11: exit $suite"
    (( status == 0 )) && status=$suite
fi
exit "$status"
