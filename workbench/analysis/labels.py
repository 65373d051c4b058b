"""Text columns as integer codes plus one label per distinct value, so that analyses group and look up
per distinct name or shape signature, never per row (a 4M-event trace has a few thousand distinct names).
Categorical columns (what the reader produces) cost nothing; others are factorised once.

And the one shortening of kernel and op names for every chart and text table (``short_name``,
``unique_labels``): the function name as Nsight Systems shows it, never two kernels under one label."""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np
import pandas as pd


def as_text(value) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    return value if isinstance(value, str) else str(value)


def codes_and_labels(values: pd.Series | None, n: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(int64 code per row, object array of str labels). Missing values get the label "" (the last one).
    ``values=None`` (a column the trace lacks) gives ``n`` rows of ""."""
    if values is None:
        return np.zeros(n, dtype=np.int64), np.array([""], dtype=object)
    if isinstance(values.dtype, pd.CategoricalDtype):
        uniques = values.cat.categories
        codes = values.cat.codes.to_numpy().astype(np.int64)
    else:
        codes, uniques = pd.factorize(values)
        codes = codes.astype(np.int64)
    text = np.array([as_text(u) for u in uniques] + [""], dtype=object)
    codes[codes < 0] = len(text) - 1
    labels, merged = np.unique(text, return_inverse=True)  # one code per distinct text ("" and NaN alike)
    return merged.astype(np.int64)[codes], labels.astype(object)


def column_codes(df: pd.DataFrame, col: str) -> tuple[np.ndarray, np.ndarray]:
    return codes_and_labels(df[col] if col in df.columns else None, len(df))


def label_mask(labels: np.ndarray, codes: np.ndarray, wanted) -> np.ndarray:
    """Rows whose label is in ``wanted``: tested once per label."""
    hit = np.fromiter((lab in wanted for lab in labels), dtype=bool, count=len(labels))
    return hit[codes]


# --- names for people: kernel and op names shortened as Nsight Systems shows them ------------------------------

MAX_LABEL_CHARS = 56
# wrapper kernels whose own name says nothing: the label names their first telling template argument
_WRAPPERS = frozenset(
    {
        "Kernel",
        "Kernel2",
        "device_kernel",
        "kernel",
        "elementwise_kernel",
        "vectorized_elementwise_kernel",
        "unrolled_elementwise_kernel",
        "elementwise_kernel_with_index",
        "reduce_kernel",
        "distribution_elementwise_grid_stride_kernel",
        "index_elementwise_kernel",
        "launch_kernel",
    }
)
_NOT_TELLING = frozenset(
    {
        "void",
        "bool",
        "char",
        "short",
        "int",
        "long",
        "unsigned",
        "signed",
        "float",
        "double",
        "half",
        "true",
        "false",
        "std",
        "array",
        "operator",
        "const",
        "at",
        "native",
        "c10",
        "detail",
        "cuda",
        "cutlass",
        "anonymous",
        "namespace",
        "lambda",
        "ul",
        "u",
        "l",
    }
)
_OPEN, _CLOSE = "<({[", ">)}]"
_ANON = "(anonymous namespace)"


def _top_level(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` where no bracket is open."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        ch = text[i]
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(depth - 1, 0)
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            start = i + len(sep)
            i = start
            continue
        i += 1
    parts.append(text[start:])
    return parts


def _first_top(text: str, ch: str) -> int:
    """Index of the first ``ch`` outside brackets (-1 if none); ``ch`` itself opens a bracket."""
    depth = 0
    for i, c in enumerate(text):
        if c == ch and depth == 0:
            return i
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth = max(depth - 1, 0)
    return -1


def _identifier(component: str) -> str:
    """A name component without its template arguments and parameter list."""
    for ch in "<(":
        at = _first_top(component, ch)
        if at > 0:
            component = component[:at]
    return component.strip()


def _telling(argument: str) -> str:
    """The most telling identifier of a template argument ('' when it holds only numbers and types)."""
    for component in reversed(_top_level(argument.strip(), "::")):
        component = component.strip()
        if component.startswith(("{", "operator")):  # lambdas, call operators
            continue
        words = _identifier(component).split()
        word = words[-1] if words else ""
        if _WORD.fullmatch(word) and word not in _NOT_TELLING:
            return word
    return ""


_WORD = re.compile(r"[A-Za-z_]\w*")


def _demangled_signature(name: str) -> str | None:
    """The function's own name out of a C++ signature ('void ns::f<T>(int, float*)'), None if not one."""
    text = name.replace(_ANON, "{anon}").strip()
    paren = _first_top(text, "(")
    if paren <= 0 or text[paren - 1] == " " or not text.rstrip().endswith((")", "const")):
        if "<" not in text or not text.endswith(">"):
            return None
        paren = len(text)
    head = text[:paren]
    words = _top_level(head, " ")
    qualified = words[-1] if words else head  # the return type goes
    components = _top_level(qualified, "::")
    last = components[-1]
    ident = _identifier(last)
    if not ident or not (ident[0].isalpha() or ident[0] in "_~"):
        return None
    lt = _first_top(last, "<")
    if ident in _WRAPPERS and lt > 0:
        arguments = _top_level(last[lt + 1 : last.rfind(">")], ",")
        telling = next((t for t in map(_telling, arguments) if t), "")
        if telling and ident in ("Kernel", "Kernel2", "device_kernel", "kernel"):
            return telling
        if telling:
            return f"{ident}<{telling}>"
    return ident


_SOURCE_NAME = re.compile(r"(\d+)")


def _mangled_name(name: str) -> str | None:
    """The function identifier of an Itanium-mangled name (``_ZN7cutlass7Kernel2I...`` -> ``Kernel2``,
    or its first template argument's identifier where the function is a generic wrapper); None if
    the name is not mangled. Only nested and plain source names are read; the rest is skipped."""
    demangled = _system_demangle(name)
    if demangled:
        return _demangled_signature(demangled) or demangled
    if not name.startswith("_Z"):
        return None
    pos = 2
    nested = name.startswith("_ZN", 0)
    if nested:
        pos = 3
        while pos < len(name) and name[pos] in "rVKRO":
            pos += 1
    idents: list[str] = []
    template_first = ""
    while pos < len(name):
        if name.startswith("St", pos):
            pos += 2
            continue
        match = _SOURCE_NAME.match(name, pos)
        if match:
            size = int(match.group(1))
            start = match.end()
            idents.append(name[start : start + size])
            pos = start + size
            if not nested:
                break
            continue
        if name[pos] == "I":  # template arguments: the first telling source name
            template_first = _first_template_name(name, pos + 1)
        break
    if not idents:
        return None
    ident = idents[-1]
    if ident in _WRAPPERS and template_first and template_first.isidentifier():
        return (
            template_first
            if ident in ("Kernel", "Kernel2", "device_kernel", "kernel")
            else f"{ident}<{template_first}>"
        )
    return ident


_SKIPPED = re.compile(r"L[^E]*E|[ST][0-9A-Z]*_|S[a-z]")  # literals, substitutions, std:: abbreviations


def _first_template_name(name: str, pos: int) -> str:
    """The first source name in mangled template arguments from ``pos`` that is not a plain type."""
    while pos < len(name):
        skipped = _SKIPPED.match(name, pos)
        if skipped:
            pos = skipped.end()
            continue
        match = _SOURCE_NAME.match(name, pos)
        if match:
            start = match.end()
            ident = name[start : start + int(match.group(1))]
            if ident not in _NOT_TELLING:
                return ident
            pos = start + len(ident)
            continue
        pos += 1
    return ""


@functools.lru_cache(maxsize=1)
def _cxa_demangle() -> Any:
    """libstdc++'s ``__cxa_demangle`` through ctypes (no subprocess), or None where it is not found."""
    import ctypes
    import ctypes.util

    for candidate in (ctypes.util.find_library("stdc++"), "libstdc++.so.6", "libc++.so.1", "libc++abi.dylib"):
        if not candidate:
            continue
        try:
            library = ctypes.CDLL(candidate)
            function = library.__cxa_demangle
        except (OSError, AttributeError):
            continue
        function.restype = ctypes.c_void_p
        function.argtypes = [
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_size_t),
            ctypes.POINTER(ctypes.c_int),
        ]
        free = ctypes.CDLL(ctypes.util.find_library("c") or None).free
        free.argtypes = [ctypes.c_void_p]
        return function, free
    return None


def _system_demangle(name: str) -> str | None:
    """The demangled text of an Itanium name, where the C++ runtime's demangler is at hand."""
    if not name.startswith("_Z") or len(name) > 4096:
        return None
    found = _cxa_demangle()
    if found is None:
        return None
    import ctypes

    function, free = found
    status = ctypes.c_int(0)
    pointer = function(name.encode("ascii", "replace"), None, None, ctypes.byref(status))
    if status.value != 0 or not pointer:
        return None
    try:
        return ctypes.string_at(pointer).decode("utf-8", "replace")
    finally:
        free(pointer)


def cut(text: str, limit: int = MAX_LABEL_CHARS) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis (the one cut of every view)."""
    return text if len(text) <= limit else text[: max(limit - 1, 1)] + "…"


@functools.lru_cache(maxsize=65536)
def short_name(name: Any, limit: int = MAX_LABEL_CHARS) -> str:
    """A kernel's or op's name as a person reads it, the way Nsight Systems shows it: the function's
    own name (no return type, template arguments, parameter list or namespaces); a generic wrapper
    kernel (``cutlass::Kernel2<X>``, ``vectorized_elementwise_kernel<4, Functor<T>>``) named by its
    telling template argument; ``_Z…`` names demangled. Names that are not C++ signatures
    (``aten::mm``, ``Memcpy DtoH (Device -> Pinned)``, Triton kernels) stay, cut to ``limit``.
    Two different names may shorten alike: :func:`unique_labels` tells them apart."""
    text = as_text(name).strip(" \t\r\n")
    if not text:
        return ""
    short = _mangled_name(text) if text.startswith("_Z") else _demangled_signature(text)
    return cut(short or text, limit)


def unique_labels(names: Any, limit: int = MAX_LABEL_CHARS) -> list[str]:
    """One short label per name (:func:`short_name`), where two different names never share a label:
    the second and later names that shorten alike get `` [2]``, `` [3]`` ... in order of appearance.
    The same name always gets the same label."""
    names = [as_text(n) for n in names]
    by_name: dict[str, str] = {}
    taken: dict[str, int] = {}
    used: set[str] = set()
    for name in names:
        if name in by_name:
            continue
        base = short_name(name, limit)
        label = base
        if label in used:
            k = taken.get(base, 1)
            while label in used:
                k += 1
                label = f"{cut(base, limit - len(str(k)) - 3)} [{k}]"
            taken[base] = k
        used.add(label)
        by_name[name] = label
    return [by_name[n] for n in names]
