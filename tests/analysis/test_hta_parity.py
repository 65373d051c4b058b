"""Our numbers against Holistic Trace Analysis 0.5's CSVs on every shared trace set, under its semantics
(``hta_noround``: it drops the last ProfilerStep; noround CSVs, since several traces have sub-µs
timestamps). Tolerance: 0.5 % relative or 1 µs, whichever is larger."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.analysis.conftest import HTA_DIR, load_set
from workbench.analysis import (comm_overlap, idle_breakdown, kernel_breakdown, launch_stats,
                                temporal_breakdown)

SETS = sorted(p.name for p in HTA_DIR.iterdir() if p.is_dir())
REL, ABS_US = 0.005, 1.0
# HTA's per-segment int truncation on traces whose float timestamps lose precision at 1e15 µs:
# kernel-type rows there are compared with the looser bound below (the temporal sums stay at 0.5 %).
NS_TRACES = {"hta_v100_ddp_resnet_1rank"}


def close(ours, ref, rel=REL, abs_us=ABS_US) -> np.ndarray:
    ours, ref = np.asarray(ours, float), np.asarray(ref, float)
    return np.abs(ours - ref) <= np.maximum(abs_us, rel * np.abs(ref))


def hta(set_name: str, name: str) -> pd.DataFrame:
    return pd.read_csv(HTA_DIR / set_name / f"{name}.csv", index_col=0)


# Known, open deviations (strict: they fail loudly once fixed):
# alexnet/resnet idle: HTA's cuda_sync
# markers and float-precision gap splits.
OPEN = {

        ("idle", "hta_a100_alexnet"), ("idle", "hta_v100_ddp_resnet_1rank")}


def cases(kind):
    return [pytest.param(s, marks=pytest.mark.xfail(strict=True, reason="open deviation, see OPEN"))
            if (kind, s) in OPEN else s for s in SETS]


def test_parity_covers_every_shared_set():
    assert len(SETS) == 11


@pytest.mark.parametrize("set_name", cases("temporal"))
def test_temporal_breakdown_matches_hta(set_name):
    ours = temporal_breakdown(load_set(set_name), "hta_noround").table.set_index("rank")
    ref = hta(set_name, "temporal_breakdown").set_index("rank")
    for col, ref_col in (("idle_us", "idle_time(us)"), ("compute_us", "compute_time(us)"),
                         ("non_compute_us", "non_compute_time(us)"), ("kernel_time_us", "kernel_time(us)")):
        ok = close(ours.loc[ref.index, col], ref[ref_col], abs_us=2.0)
        assert ok.all(), f"{set_name} {col}: ours {ours.loc[ref.index, col].tolist()} vs HTA {ref[ref_col].tolist()}"


@pytest.mark.parametrize("set_name", cases("types"))
def test_kernel_type_breakdown_matches_hta(set_name):
    ours = kernel_breakdown(load_set(set_name), "hta_noround").type_totals().set_index("kernel_type")["dur_us"]
    ref = hta(set_name, "kernel_type_breakdown").set_index("kernel_type")["sum"]
    ref = ref[ref > 0]
    rel = 0.03 if set_name in NS_TRACES else REL
    ok = close(ours.reindex(ref.index).fillna(0.0), ref, rel=rel)
    assert ok.all(), f"{set_name}: ours {ours.to_dict()} vs HTA {ref.to_dict()}"


@pytest.mark.parametrize("set_name", cases("per_kernel"))
def test_per_kernel_sums_and_counts_match_hta(set_name):
    t = kernel_breakdown(load_set(set_name), "hta_noround").table
    ref = hta(set_name, "kernel_breakdown_full")
    ref = ref[ref["name"] != "others"]
    ours = t.groupby(["rank", "name"])["sum_us"].sum()
    key = pd.MultiIndex.from_arrays([ref["rank"], ref["name"]])
    got = ours.reindex(key).to_numpy()
    ok = close(got, ref["sum (us)"].to_numpy(), rel=0.03 if set_name in NS_TRACES else REL, abs_us=2.0)
    assert ok.mean() >= 0.99, f"{set_name}: {int((~ok).sum())} of {len(ok)} kernels differ"
    # counts: HTA has no count column; its mean = sum / count
    count = t.groupby(["rank", "name"])["count"].sum().reindex(key).to_numpy()
    ref_count = (ref["sum (us)"] / ref["mean (us)"]).round().to_numpy()
    assert (count[ok] == ref_count[ok]).all()


@pytest.mark.parametrize("set_name", cases("idle"))
def test_idle_breakdown_matches_hta(set_name):
    ours = idle_breakdown(load_set(set_name), "hta_noround").table
    ref = hta(set_name, "idle_time_breakdown")
    m = ref.merge(ours, on=["rank", "stream", "idle_category"], how="left")
    # the per-stream idle total is robust; the split between categories can move a gap or two
    total_ours = m.groupby(["rank", "stream"])["idle_us"].sum()
    total_ref = m.groupby(["rank", "stream"])["idle_time"].sum()
    assert close(total_ours, total_ref, abs_us=2.0).all(), set_name
    ok = close(m["idle_us"], m["idle_time"], rel=0.03 if set_name in NS_TRACES else REL, abs_us=2.0)
    assert ok.mean() >= 0.95, m[~ok]


@pytest.mark.parametrize("set_name", SETS)
def test_comm_overlap_matches_hta(set_name):
    ours = comm_overlap(load_set(set_name), "hta_noround").table.set_index("rank")["overlap_pct"]
    ref = hta(set_name, "comm_comp_overlap").set_index("rank")["comp_comm_overlap_pctg"]
    got = ours.reindex(ref.index)
    assert (got.isna() == ref.isna()).all(), set_name
    assert close(got[ref.notna()], ref[ref.notna()], rel=0.0, abs_us=0.01).all()


LAUNCH_SETS = [s for s in SETS if (HTA_DIR / s / "cuda_kernel_launch_stats.csv").exists()]


@pytest.mark.parametrize("set_name", LAUNCH_SETS)
def test_launch_stats_match_hta(set_name):
    ours = launch_stats(load_set(set_name), "hta_noround").table
    ref = hta(set_name, "cuda_kernel_launch_stats")
    m = ref.merge(ours, on=["rank", "correlation"], how="left")
    assert m["api"].notna().all(), f"{set_name}: launches HTA has and we lack"
    assert len(ours) == len(ref)
    assert close(m["launch_delay_us"], m["launch_delay"], abs_us=0.01).all()
    assert close(m["runtime_us"], m["cpu_duration"], abs_us=0.01).all()
    assert close(m["gpu_us"], m["gpu_duration"], abs_us=0.01).all()
