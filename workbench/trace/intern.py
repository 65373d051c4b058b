"""Integer codes for a text column, shared by every chunk of a file.

A value keeps its code from the first chunk it appears in to the end of the file, so chunks
hold plain int arrays (no per-chunk categories to unite later) and the column becomes a
categorical once, at the end. An int and its decimal text (pid 7 and "7") share a code.
"""
from __future__ import annotations

from itertools import compress, repeat
from operator import attrgetter

import numpy as np
import pandas as pd


class Interner:
    def __init__(self) -> None:
        self._codes: dict = {}  # value -> code
        self._by_label: dict[str, int] = {}
        self.labels: list[str] = []
        self._flags: dict = {}

    def encode(self, items: list, field: str) -> np.ndarray:
        """Codes of ``item.<field>`` for each item; values not seen before get new codes.

        No list of the values is built: they are read straight into the int array.
        """
        n, get = len(items), attrgetter(field)
        codes = np.fromiter(map(self._codes.get, map(get, items), repeat(-1)), dtype=np.int32, count=n)
        if n and codes.min() < 0:
            for value in set(compress(map(get, items), (codes < 0).tolist())):
                self._add(value)
            codes = np.fromiter(map(self._codes.__getitem__, map(get, items)), dtype=np.int32, count=n)
        return codes

    def _add(self, value) -> None:
        label = value if isinstance(value, str) else str(value)
        code = self._by_label.get(label)
        if code is None:
            code = self._by_label[label] = len(self.labels)
            self.labels.append(label)
        self._codes[value] = code

    def flags(self, test) -> np.ndarray:
        """``test(label)`` for every label, as a bool array indexed by code (cached per test)."""
        done = self._flags.setdefault(test, [])
        done.extend(test(label) for label in self.labels[len(done):])
        return np.array(done, dtype=bool)

    def numbers(self, prefix: str = "") -> np.ndarray:
        """Each label as an integer ("7", or "stream 7" with prefix "stream "); -1 where it is not one."""
        labels = pd.Series(self.labels, dtype=object).astype(str)
        if prefix:
            labels = labels.str.replace(prefix, "", regex=False)
        values = pd.to_numeric(labels, errors="coerce").fillna(-1).to_numpy()
        return values.astype(np.int64) if len(values) else np.zeros(0, dtype=np.int64)

    def categorical(self, codes: np.ndarray) -> pd.Categorical:
        """The rows' labels as a categorical holding only the labels they use."""
        used = np.flatnonzero(np.bincount(codes, minlength=len(self.labels))) if len(codes) else \
            np.zeros(0, dtype=np.int64)
        remap = np.zeros(len(self.labels), dtype=np.int32)
        remap[used] = np.arange(len(used), dtype=np.int32)
        labels = np.array(self.labels, dtype=object)[used]
        return pd.Categorical.from_codes(remap[codes] if len(codes) else codes,
                                         dtype=pd.CategoricalDtype(pd.Index(labels, dtype="str")))
