"""Which source files are the user's code, by the name a Python frame's file has in a trace.

torch.profiler's Python tracer names a frame's file relative to the ``sys.path`` entry it was
found under (``torch/nn/modules/module.py``, ``model.py``), or absolute where none holds it. A file
is the user's unless it is the standard library's, a third-party package's (``site-packages``,
``dist-packages``, or a well-known framework's top-level package), torch's or workbench's own, or a
``<...>`` pseudo-file other than an IPython cell (an absolute path, a file found outside
``sys.path``, is the user's unless a folder on it is such a package). ``user_paths`` overrides the
guess.

Pure text rules (no torch, no analysis): the trace's Python stack (``workbench.analysis.
python_stack``) and the traced pass's statement recorder (``workbench.capture.statements``) use the
same ones, so that both call the same frames the user's.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

# top-level packages that are frameworks or tools, not the user's code (their frames are skipped)
LIBRARY_PACKAGES = frozenset(
    {
        "torch",
        "torchvision",
        "torchaudio",
        "torchtext",
        "functorch",
        "triton",
        "numpy",
        "scipy",
        "pandas",
        "transformers",
        "accelerate",
        "diffusers",
        "timm",
        "einops",
        "xformers",
        "flash_attn",
        "apex",
        "deepspeed",
        "fairscale",
        "lightning",
        "pytorch_lightning",
        "sympy",
        "jinja2",
        "tqdm",
        "IPython",
        "ipykernel",
        "jupyter_client",
        "tornado",
        "zmq",
        "traitlets",
        "pytest",
        "_pytest",
        "pluggy",
        "papermill",
        "nbclient",
        "workbench",
        "typing_extensions",
        "filelock",
        "fsspec",
        "_distutils_hack",
        "setuptools",
        "pkg_resources",
        "importlib_metadata",
    }
)
CELL_FILE_PREFIXES = ("<ipython-input-", "<cell")  # IPython's cell pseudo-files are the user's
STDLIB_MODULES = frozenset(getattr(sys, "stdlib_module_names", ())) | {"__future__"}
_PYTHON_LIB = re.compile(r"python3(\.\d+)?")
_DRIVE = re.compile(r"[A-Za-z]:/")


def is_user_file(file: str, user_paths: Sequence[str] | None = None) -> bool:
    """Whether frames of ``file`` (as the trace names it) are the user's code (see the module's docstring)."""
    path = file.replace("\\", "/")
    if user_paths is not None:
        return any(path.startswith(p) or f"/{p}" in path or path.endswith(p) for p in user_paths)
    if path.startswith("<"):
        return path.startswith(CELL_FILE_PREFIXES)
    parts = [p for p in path.split("/") if p]
    if not parts:
        return False
    if any(p in ("site-packages", "dist-packages") or _PYTHON_LIB.fullmatch(p) for p in parts[:-1]):
        return False
    if path.startswith("/") or _DRIVE.match(path):  # absolute: not under a sys.path entry
        return not any(p in LIBRARY_PACKAGES for p in parts[:-1])
    top = parts[0][:-3] if len(parts) == 1 and parts[0].endswith(".py") else parts[0]
    return top not in LIBRARY_PACKAGES and top not in STDLIB_MODULES
