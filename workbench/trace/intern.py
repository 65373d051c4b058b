"""Integer codes for a text column, shared by every chunk of a file.

A value keeps its code from the first chunk it appears in to the end of the file, so chunks
hold plain int arrays (no per-chunk categories to unite later) and the column becomes a
categorical once, at the end. An int and its decimal text (pid 7 and "7") share a code.
"""

from __future__ import annotations

from itertools import repeat
from operator import attrgetter, itemgetter

import numpy as np
import pandas as pd


class Interner:
    def __init__(self) -> None:
        self._codes: dict = {}  # value -> code
        self._by_label: dict[str, int] = {}
        self.labels: list[str] = []
        self._flags: dict = {}

    def _add(self, value) -> int:
        label = value if isinstance(value, str) else str(value)
        code = self._by_label.get(label)
        if code is None:
            code = self._by_label[label] = len(self.labels)
            self.labels.append(label)
        self._codes[value] = code
        return code

    def code(self, value) -> int:
        """The code of one value (a new one if it was not seen before)."""
        code = self._codes.get(value)
        return self._add(value) if code is None else code

    def flags(self, test) -> np.ndarray:
        """``test(label)`` for every label, as a bool array indexed by code (cached per test)."""
        done = self._flags.setdefault(test, [])
        done.extend(test(label) for label in self.labels[len(done) :])
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
        used = (
            np.flatnonzero(np.bincount(codes, minlength=len(self.labels)))
            if len(codes)
            else np.zeros(0, dtype=np.int64)
        )
        remap = np.zeros(len(self.labels), dtype=np.int32)
        remap[used] = np.arange(len(used), dtype=np.int32)
        labels = np.array(self.labels, dtype=object)[used]
        return pd.Categorical.from_codes(
            remap[codes] if len(codes) else codes, dtype=pd.CategoricalDtype(pd.Index(labels, dtype="str"))
        )


class KeyInterner:
    """Several text fields of each item coded in one pass: one dict lookup per item, keyed by the
    tuple of its fields, gives a code per distinct combination; each field's own code (from its
    ``Interner``) then comes from a small per-combination table."""

    def __init__(self, fields: tuple[str, ...], interners: tuple[Interner, ...]) -> None:
        self._get = attrgetter(*fields)
        self._interners = interners
        self._combos: dict[tuple, int] = {}
        self._parts: list[list[int]] = [[] for _ in fields]

    def encode(self, items: list) -> list[np.ndarray]:
        """For each field, the codes of ``item.<field>`` for all items.

        One pass over the items; only the items whose combination was not seen before are
        visited again, and new combinations get their codes in order of first appearance.
        """
        n, get, combos = len(items), self._get, self._combos
        combo = np.fromiter(map(combos.get, map(get, items), repeat(-1)), dtype=np.int32, count=n)
        if n and combo.min() < 0:
            new = np.flatnonzero(combo < 0)
            picked = itemgetter(*new.tolist())(items) if len(new) > 1 else (items[new[0]],)
            keys = list(map(get, picked))
            for key in dict.fromkeys(keys):  # each new combination once, in order of first appearance
                if key not in combos:
                    self._add(key)
            combo[new] = np.fromiter(map(combos.__getitem__, keys), dtype=np.int32, count=len(keys))
        return [np.array(part, dtype=np.int32)[combo] for part in self._parts]

    def _add(self, key: tuple) -> None:
        self._combos[key] = len(self._combos)
        for part, interner, value in zip(self._parts, self._interners, key):
            part.append(interner.code(value))
