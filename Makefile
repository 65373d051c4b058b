# Two commands on a fresh machine:  make demo   (report on the built-in demo workload)
#                                   make test   (the whole suite)
# Both create .venv and install what they need. Override PYTHON or TORCH_SPEC as needed, e.g.
#   make demo TORCH_SPEC="torch==2.13.0 --index-url <your CUDA wheel index>"
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
TRITON_SPEC ?= triton==3.9.0
REPORT_DIR ?= reports/demo
PY := $(VENV)/bin/python
STAMP := $(VENV)/.workbench-installed

.PHONY: demo test setup browser clean bench lint

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first, pinned: the CPU build on local disk; a torch already there (your CUDA build) is kept
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet $(TORCH_SPEC)
	$(PY) -m pip install --quiet -e ".[dev]"
	# Triton for the interpreter-checked Triton variants; a CUDA torch brings its own, which is kept
	$(PY) -c "import triton" 2>/dev/null || $(PY) -m pip install --quiet $(TRITON_SPEC)
	touch $(STAMP)

setup: $(STAMP)

# Debian's chromium for the browser tests (best effort: they skip, with the reason, without it)
browser:
	@command -v chromium >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && \
		(apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || \
		echo "chromium could not be installed: browser tests will be skipped"; }

demo: $(STAMP)
	OMP_WAIT_POLICY=PASSIVE $(VENV)/bin/workbench report --out $(REPORT_DIR)

test: $(STAMP) browser lint
	OMP_WAIT_POLICY=PASSIVE $(PY) -m pytest -q --durations=25

# ruff, configured in pyproject.toml: the lint rules, and the formatting as a check (nothing rewritten)
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: $(STAMP)
	$(PY) benchmarks/profile_overhead.py
	$(PY) benchmarks/charts.py

clean:
	rm -rf $(VENV) reports .pytest_cache
