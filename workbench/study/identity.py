"""What makes a baseline the baseline: its code, its inputs, its environment, its commit.

``baseline_id`` hashes the callable's source (``inspect.getsource`` of the function under any
wrapper such as ``torch.compile``, plus the variant's kind and options), the inputs' shapes,
dtypes and devices and the seed they were built under, the stable part of the environment
fingerprint (device, versions, math mode, threads; not the time it was read, nor the process's
argv or its random seed) and, where the source lives in a git repository, the commit and whether
the tree was dirty. Two baselines share an ID only when all of these agree.

The environment comes from the profiled run (``run.environment``), never read here.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import subprocess
from pathlib import Path
from typing import Any, Callable

from workbench._moved import current_module
from workbench.errors import StudyError

VOLATILE_ENV_KEYS = ("recorded_at", "argv0")
VOLATILE_TORCH_KEYS = ("initial_seed",)


def digest(value: Any, length: int = 12) -> str:
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def unwrap(fn: Any) -> Any:
    """The user's function under the wrappers workbench and torch put around it (a Variant, a
    torch.compile'd function or module, functools.wraps/partial)."""
    seen = set()
    while id(fn) not in seen:
        seen.add(id(fn))
        inner = (
            getattr(fn, "_torchdynamo_orig_callable", None)
            or getattr(fn, "_orig_mod", None)
            or getattr(fn, "__wrapped__", None)
        )
        if inner is None and type(fn).__name__ == "Variant" and hasattr(fn, "fn"):
            inner = fn.fn
        if inner is None and type(fn).__name__ == "partial":
            inner = fn.func
        if inner is None:
            return fn
        fn = inner
    return fn


def source_of(fn: Any) -> str:
    """The callable's source text; for one without retrievable source (a builtin, a lambda typed
    at a prompt) its code object's bytes and constants stand in, said as such."""
    target = unwrap(fn)
    try:
        return inspect.getsource(target)
    except (OSError, TypeError):
        pass
    code = getattr(target, "__code__", None)
    if code is not None:
        return f"<no source: code of {getattr(target, '__qualname__', '?')}> {code.co_code.hex()} {code.co_consts!r}"
    if callable(target) and hasattr(type(target), "forward"):  # an nn.Module instance
        try:
            return inspect.getsource(type(target))
        except (OSError, TypeError):
            pass
    return f"<no source: {type(target).__module__}.{type(target).__qualname__}>"


def source_hash(fn: Any) -> str:
    return hashlib.sha256(source_of(fn).encode()).hexdigest()[:16]


def callable_ref(fn: Any) -> dict[str, Any]:
    """Where the (unwrapped) callable can be found again in a fresh process: module, qualname,
    file, line. A function defined in a notebook or ``__main__`` cannot be imported back; the
    study then asks for it (``study.attach``)."""
    target = unwrap(fn)
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", None)
    try:
        file = inspect.getsourcefile(target)
        line = inspect.getsourcelines(target)[1]
    except (OSError, TypeError):
        file, line = None, None
    return {
        "module": module,
        "qualname": qualname,
        "file": file,
        "line": line,
        "importable": bool(module and qualname and module != "__main__" and "<" not in qualname),
    }


def resolve_ref(ref: dict[str, Any] | None, what: str) -> Callable[..., Any]:
    """The callable a ``callable_ref`` names, imported again; a clear StudyError where it is gone."""
    if not ref or not ref.get("module") or not ref.get("qualname"):
        raise StudyError(f"the {what} was not recorded with an importable name")
    module_name, qualname = current_module(ref["module"]), ref["qualname"]  # a module moved since: where it is now
    if not ref.get("importable", True):
        raise StudyError(
            f"the {what} {qualname!r} was defined in {module_name!r} (a notebook or script), "
            f"which cannot be imported again in this process"
        )
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure means the callable is gone
        raise StudyError(
            f"the {what} {module_name}.{qualname} no longer exists: importing {module_name!r} "
            f"failed ({type(exc).__name__}: {exc})"
        ) from None
    for part in qualname.split("."):
        if not hasattr(obj, part):
            raise StudyError(
                f"the {what} {module_name}.{qualname} no longer exists: {module_name!r} has no "
                f"{qualname!r} (renamed or deleted?)"
            )
        obj = getattr(obj, part)
    if not callable(obj):
        raise StudyError(f"the {what} {module_name}.{qualname} is no longer callable")
    return obj


def tensor_signature(value: Any) -> Any:
    """Shapes, dtypes and devices of the tensors in a nested value; other leaves by type (and
    value, for small plain ones)."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return {
            "shape": [int(s) for s in value.shape],
            "dtype": str(value.dtype).replace("torch.", ""),
            "device": str(getattr(value, "device", "cpu")),
            "requires_grad": bool(getattr(value, "requires_grad", False)),
        }
    if isinstance(value, (list, tuple)):
        return [tensor_signature(v) for v in value]
    if isinstance(value, dict):
        return {str(k): tensor_signature(v) for k, v in value.items()}
    if isinstance(value, (int, float, bool, str)) or value is None:
        return {"value": value}
    return {"type": f"{type(value).__module__}.{type(value).__qualname__}"}


def stable_environment(env: dict[str, Any]) -> dict[str, Any]:
    """The environment fingerprint without what changes between two reads of the same machine."""
    out = {k: v for k, v in env.items() if k not in VOLATILE_ENV_KEYS}
    torch = out.get("torch")
    if isinstance(torch, dict):
        out["torch"] = {k: v for k, v in torch.items() if k not in VOLATILE_TORCH_KEYS}
    return out


def environment_key(env: dict[str, Any]) -> str:
    return digest(stable_environment(env), 16)


def device_of(env: dict[str, Any]) -> str:
    """A short device description from a fingerprint (GPU names or the CPU model)."""
    gpu = (env.get("torch") or {}).get("gpu") or {}
    if gpu.get("available"):
        names = sorted({d.get("name", "?") for d in gpu.get("devices", ())})
        return f"{gpu.get('count', len(names))}x {', '.join(names)}"
    return (env.get("host") or {}).get("cpu_model", "unknown CPU")


def git_state(file: str | None) -> dict[str, Any] | None:
    """{commit, dirty, root} of the git repository holding ``file``; None outside one (or without git)."""
    if not file:
        return None
    folder = Path(file).resolve().parent
    if not folder.is_dir():
        return None

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    return {
        "commit": commit,
        "dirty": bool(status) if status is not None else None,
        "root": git("rev-parse", "--show-toplevel"),
    }


def baseline_id(
    *,
    source: str,
    variant: dict[str, Any],
    inputs: dict[str, Any],
    environment: dict[str, Any],
    git: dict[str, Any] | None,
    parent: str | None,
) -> str:
    """``b-`` and 12 hex digits of a hash over everything that defines the baseline."""
    return "b-" + digest(
        {
            "source": source,
            "variant": variant,
            "inputs": inputs,
            "environment": stable_environment(environment),
            "git": {k: (git or {}).get(k) for k in ("commit", "dirty")} if git else None,
            "parent": parent,
        }
    )
