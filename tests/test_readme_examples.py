"""Every public Python example of the README runs as written: each ```python block is executed, one
top-level statement after another, in a fresh interpreter whose working folder holds the files the
example names (a trace ``rank-0.pt.trace.json.gz``, a folder of rank files ``job/traces``).

A statement that needs what a test machine does not have (a Dask scheduler on another host) is not run;
it is listed in NOT_RUN with the reason, and a listed statement that is no longer in the README fails the
test, so nothing is skipped silently. A block that continues an earlier one (the README's
``profile_distributed`` example names a function "defined in a module") gets the names it assumes from
PRELUDES, stated here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DATA = Path(__file__).resolve().parent / "data"

# the start of a statement -> why it is not run here
NOT_RUN = {
    'trace = wb.load_trace("/shared/job/traces", client=Client("tcp://scheduler-host:8786"))': "needs a Dask scheduler at tcp://scheduler-host:8786 and a shared file system "
    "(tests/distributed/test_rank_map_dask.py runs the same call on a local cluster)",
}
# the first line of a block -> the code run before it: the names the README's text gives it
PRELUDES = {
    "trace = wb.profile_distributed(train_step_loop,": "import workbench as wb\n"
    "from tests.distributed.workloads import straggler_job as train_step_loop  # a module's function\n",
}

DRIVER = """\
import ast, json, sys
source, prelude, not_run = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
names = {"__name__": "__main__"}
exec(compile(prelude, "<prelude>", "exec"), names)
skipped = []
for node in ast.parse(source).body:
    text = ast.get_source_segment(source, node)
    if any(text.startswith(start) for start in not_run):
        skipped.append(text)
        continue
    exec(compile(ast.Module([node], []), f"<README line {node.lineno}>", "exec"), names)
print(json.dumps({"skipped": skipped}))
"""


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line, code) of each ```python block of a Markdown text."""
    blocks = []
    for match in re.finditer(r"^```python\n(.*?)^```", text, flags=re.S | re.M):
        blocks.append((text.count("\n", 0, match.start()) + 1, match.group(1)))
    return blocks


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def _folder(tmp_path: Path) -> Path:
    """A working folder with the files the README's examples open."""
    shutil.copy(DATA / "cpu" / "cpu_mlp_plain.json.gz", tmp_path / "rank-0.pt.trace.json.gz")
    shutil.copytree(DATA / "gpu" / "dlrm_8rank", tmp_path / "job" / "traces")
    return tmp_path


def test_the_readme_has_python_examples_and_every_exception_is_still_in_it() -> None:
    assert len(BLOCKS) >= 2
    code = "\n".join(block for _, block in BLOCKS)
    for start in NOT_RUN:
        assert start in code, f"NOT_RUN names a statement the README no longer has: {start!r}"
    for first in PRELUDES:
        assert any(block.startswith(first) for _, block in BLOCKS), f"PRELUDES names no README block: {first!r}"


@pytest.mark.slow
@pytest.mark.parametrize("line, code", BLOCKS, ids=[f"README-line-{line}" for line, _ in BLOCKS])
def test_a_readme_example_runs_as_written(line: int, code: str, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    prelude = next((p for first, p in PRELUDES.items() if code.startswith(first)), "")
    env = dict(
        os.environ,
        OMP_WAIT_POLICY="PASSIVE",
        WORKBENCH_HISTORY=str(tmp_path / "history.jsonl"),
        PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    )
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, code, prelude, json.dumps(list(NOT_RUN))],
        cwd=_folder(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, f"the README's example at line {line} failed:\n{done.stderr[-4000:]}"
    skipped = json.loads(done.stdout.strip().splitlines()[-1])["skipped"]
    assert all(any(s.startswith(start) for start in NOT_RUN) for s in skipped), skipped
