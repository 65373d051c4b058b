"""The one-pass ``KeyInterner.encode`` gives every event the same labels as the earlier
three-pass version (kept here as the reference), on real traces decoded in small chunks, and
assigns new codes in a deterministic order (first appearance), not in a set's hash order."""

from __future__ import annotations

from itertools import compress, repeat
from operator import attrgetter
from pathlib import Path

import msgspec
import numpy as np
import pytest

from tests.trace.conftest import GPU
from workbench.trace import decode, stream
from workbench.trace.columns import Interners
from workbench.trace.intern import Interner, KeyInterner

FIELDS = ("name", "pid", "tid", "ph", "cat")
DATA = Path(__file__).resolve().parents[1] / "data"
SHARED = Path("/work/shared/traces")


class _Item(msgspec.Struct):
    name: str
    pid: int | str
    tid: int | str
    ph: str = "X"
    cat: str = "cpu_op"


class _ReferenceKeys:
    """The earlier encode: a miss pass, a set of the new keys, then a second full pass."""

    def __init__(self) -> None:
        self.interners = tuple(Interner() for _ in FIELDS)
        self._get = attrgetter(*FIELDS)
        self._combos: dict[tuple, int] = {}
        self._parts: list[list[int]] = [[] for _ in FIELDS]

    def encode(self, items: list) -> list[np.ndarray]:
        n, get = len(items), self._get
        combo = np.fromiter(map(self._combos.get, map(get, items), repeat(-1)), dtype=np.int32, count=n)
        if n and combo.min() < 0:
            for key in set(compress(map(get, items), (combo < 0).tolist())):
                self._combos[key] = len(self._combos)
                for part, interner, value in zip(self._parts, self.interners, key):
                    part.append(interner.code(value))
            combo = np.fromiter(map(self._combos.__getitem__, map(get, items)), dtype=np.int32, count=n)
        return [np.array(part, dtype=np.int32)[combo] for part in self._parts]


def _fixtures() -> list[Path]:
    found = sorted(GPU.glob("*.json.gz"))[:3] + sorted((DATA / "cpu").glob("*.json*"))[:1]
    if SHARED.is_dir():
        found += sorted(SHARED.glob("hta_*/*.json*"))[:2] + sorted(SHARED.glob("kineto_*/*.json*"))[:1]
    return [p for p in found if p.is_file() and p.stat().st_size < 64 << 20]


def _labels(interner: Interner, codes: np.ndarray) -> list[str]:
    return np.array(interner.labels, dtype=object)[codes].tolist() if len(codes) else []


@pytest.mark.parametrize("path", _fixtures(), ids=lambda p: p.name)
def test_one_pass_encode_matches_the_reference_on_real_traces(path, monkeypatch):
    monkeypatch.setattr(decode, "CHUNK_BYTES", 64 << 10)  # many chunks: codes carried across them
    monkeypatch.setattr(stream, "BLOCK_BYTES", 16 << 10)
    interners, reference = Interners(), _ReferenceKeys()
    ours_interners = (interners.name, interners.pid, interners.tid, interners.ph, interners.cat)
    _, chunks = decode.decode_file(str(path))
    seen = 0
    for chunk in chunks:
        ours = interners.keys.encode(chunk.events)
        theirs = reference.encode(chunk.events)
        for field, interner, ref_interner, codes, ref_codes in zip(
            FIELDS, ours_interners, reference.interners, ours, theirs
        ):
            got = _labels(interner, codes)
            assert got == _labels(ref_interner, ref_codes), (path.name, field)
            values = list(map(attrgetter(field), chunk.events))
            assert got == [v if isinstance(v, str) else str(v) for v in values], (path.name, field)
        seen += len(chunk.events)
    assert seen > 0
    assert sorted(interners.name.labels) == sorted(reference.interners[0].labels)


def test_new_codes_follow_first_appearance_across_chunks():
    names = Interner()
    keys = KeyInterner(FIELDS, (names, Interner(), Interner(), Interner(), Interner()))
    first = [_Item(f"op{i % 7}", 1, 2) for i in range(50)]
    codes = keys.encode(first)[0]
    assert names.labels == [f"op{i}" for i in range(7)]
    assert codes.tolist() == [i % 7 for i in range(50)]
    second = [_Item("op3", 1, 2), _Item("new_b", 1, 2), _Item("op0", 1, 2), _Item("new_a", 1, 2), _Item("new_b", 1, 2)]
    codes = keys.encode(second)[0]
    assert names.labels[7:] == ["new_b", "new_a"]
    assert codes.tolist() == [3, 7, 0, 8, 7]
    assert [c.tolist() for c in keys.encode([])] == [[]] * len(FIELDS)


def test_an_int_and_its_text_share_a_code_and_a_single_new_item_is_coded():
    pids = Interner()
    keys = KeyInterner(FIELDS, (Interner(), pids, Interner(), Interner(), Interner()))
    assert keys.encode([_Item("a", 7, 1)])[1].tolist() == [0]
    assert keys.encode([_Item("a", "7", 1), _Item("b", 8, 1), _Item("b", "8", 1)])[1].tolist() == [0, 1, 1]
    assert pids.labels == ["7", "8"]
