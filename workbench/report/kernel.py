"""A Jupyter kernelspec that runs the current interpreter, in a temporary folder.

papermill starts kernels by name through jupyter_client, which finds kernelspecs on
``JUPYTER_PATH``. Writing one that points at ``sys.executable`` into a temp dir and prepending
that dir to ``JUPYTER_PATH`` makes reports work in a fresh venv without ``ipykernel install``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import workbench

KERNEL_NAME = "workbench-python"


def kernelspec(python: str | None = None) -> dict:
    """kernel.json for ``python`` (default: this interpreter), with workbench importable."""
    package_parent = str(Path(workbench.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (package_parent, os.environ.get("PYTHONPATH", "")) if p)
    return {
        "argv": [python or sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"workbench ({Path(python or sys.executable).name})",
        "language": "python",
        "env": {"PYTHONPATH": path, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")},
        "metadata": {"debugger": False},
    }


@contextlib.contextmanager
def current_interpreter_kernel() -> Iterator[str]:
    """Yield a kernel name that runs ``sys.executable``; the spec lives only inside the block."""
    with tempfile.TemporaryDirectory(prefix="workbench-kernel-") as root:
        spec_dir = Path(root) / "kernels" / KERNEL_NAME
        spec_dir.mkdir(parents=True)
        (spec_dir / "kernel.json").write_text(json.dumps(kernelspec(), indent=1), encoding="utf-8")
        old = os.environ.get("JUPYTER_PATH")
        os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (root, old) if p)
        try:
            yield KERNEL_NAME
        finally:
            if old is None:
                os.environ.pop("JUPYTER_PATH", None)
            else:
                os.environ["JUPYTER_PATH"] = old


def ipc_kernel_manager_class() -> type:
    """A jupyter_client kernel manager that talks to its kernel over Unix sockets (``ipc``).

    The report kernel is always local; over ``tcp`` without CurveZMQ keys ipykernel warns on
    every start that the traffic is unencrypted. Unix sockets stay on the machine (and in the
    runtime folder, readable by this user only), so there is nothing to warn about. The socket
    path is absolute: jupyter_client's default is relative to the working directory, which the
    kernel (started in the notebook's folder) and the client need not share.
    """
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class IPCKernelManager(AsyncKernelManager):
        @default("transport")
        def _transport_default(self) -> str:
            return "ipc"

        @default("ip")
        def _ip_default(self) -> str:
            return _ipc_socket_prefix()

    return IPCKernelManager


def _ipc_socket_prefix() -> str:
    """An absolute, private path prefix for a kernel's Unix sockets (kept short: Linux allows
    108 bytes per socket path)."""
    import uuid

    from jupyter_core.paths import jupyter_runtime_dir

    name = f"wb-kernel-{uuid.uuid4().hex[:12]}-ipc"
    folder = jupyter_runtime_dir()
    if len(os.path.join(folder, name)) > 90:
        folder = tempfile.mkdtemp(prefix="wb-ipc-")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return os.path.join(folder, name)
