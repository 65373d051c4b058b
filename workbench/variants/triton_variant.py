"""A user's ``@triton.jit`` kernel, through its launcher (a function with the original's
signature that allocates the output and launches the kernel).

On a CUDA/ROCm machine with triton installed it is timed like any variant.  Without a GPU,
Triton can only run under its interpreter (``TRITON_INTERPRET=1`` set *before* triton is
imported): correct, ~1000x slower than eager, so its timing is marked not meaningful.
``check_in_interpreter`` runs such a comparison in a fresh subprocess with the variable set,
for a kernel that lives in an importable module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any, Callable

from workbench.variants.spec import Variant

INTERPRETER_HINT = (
    "Triton has no CPU backend; to check it for correctness on CPU set TRITON_INTERPRET=1 "
    "before triton is imported (wb.variants.check_in_interpreter does it in a subprocess)"
)


def _interpreted() -> bool:
    return "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") == "1"


def triton(launcher: Callable[..., Any], *, name: str = "triton", numerical_class: str = "reordered") -> Variant:
    """The Triton kernel behind ``launcher`` as a variant (see the module docstring)."""
    import torch

    if torch.cuda.is_available():
        return Variant(
            name=name,
            fn=launcher,
            requires=("cuda", "triton"),
            kind="triton",
            numerical_class=numerical_class,
            description="user @triton.jit kernel",
        )
    if _interpreted():
        return Variant(
            name=name,
            fn=launcher,
            requires=("triton",),
            kind="triton",
            numerical_class=numerical_class,
            timing_meaningful=False,
            description="user @triton.jit kernel under TRITON_INTERPRET=1 (correctness only)",
        )
    return Variant(
        name=name,
        fn=launcher,
        requires=("triton",),
        kind="triton",
        numerical_class=numerical_class,
        not_applicable_reason=f"no GPU here; {INTERPRETER_HINT}",
    )


_SCRIPT = textwrap.dedent("""
    import importlib, json, sys
    import torch
    torch.set_num_threads(1)
    import workbench as wb
    mod = importlib.import_module(sys.argv[1])
    base, launcher, inputs = (getattr(mod, n) for n in sys.argv[2:5])
    cmp = wb.compare({"eager": base, "triton": wb.variants.triton(launcher)}, inputs=inputs,
                     checks=int(sys.argv[5]), budget_s=0.2, min_rounds=3, max_rounds=3, profile=False)
    print("WORKBENCH-JSON" + json.dumps(cmp.to_dict(), default=str))
""")


def check_in_interpreter(
    module: str,
    baseline: str,
    launcher: str,
    inputs: str,
    *,
    checks: int = 2,
    timeout_s: float = 600.0,
    cwd: str | None = None,
) -> Any:
    """Compare ``module.launcher`` with ``module.baseline`` under Triton's interpreter in a
    subprocess; returns the Comparison (its Triton row's timing is marked not meaningful)."""
    from workbench.errors import NotApplicableError
    from workbench.variants.results import Comparison

    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, module, baseline, launcher, inputs, str(checks)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        cwd=cwd,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("WORKBENCH-JSON")), None)
    if proc.returncode != 0 or line is None:
        raise NotApplicableError(
            f"the Triton interpreter check failed (exit {proc.returncode}): "
            f"{proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else 'no output'}"
        )
    return Comparison.from_dict(json.loads(line[len("WORKBENCH-JSON") :]))
