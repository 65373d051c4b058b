"""``wb.diff`` / ``trace_diff``: what changed between two traces.

On the shared Nsight Systems before/after pair: the total change equals the difference of the two
kernel times read straight from the files (per run: neither has steps), every kernel name is
accounted for once (appeared + disappeared + changed + unchanged = all), and the three largest
contributors are the three largest per-name differences. On a CPU eager / compiled pair: the diff
names the eager ops fused into the compiled region. Steps normalise; no step in common is said.
"""

from __future__ import annotations

import sqlite3
import warnings
from collections import defaultdict
from pathlib import Path

import pytest

from tests.trace.formats_data import shared

DATA = Path(__file__).resolve().parents[1] / "data"
PAIR = DATA / "cpu" / "diff"


def _kernel_ns(path) -> dict[str, tuple[int, int]]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {
            n: (c, t)
            for n, c, t in con.execute(
                "SELECT s.value, count(*), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                "JOIN StringIds s ON s.id = k.demangledName GROUP BY s.value"
            )
        }
    finally:
        con.close()


@pytest.fixture(scope="module")
def nsys_diff():
    import workbench as wb

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return wb.diff(
            shared("nsys", "mfu_2gpu_before.sqlite"),
            shared("nsys", "mfu_2gpu_after.sqlite"),
            label_a="before",
            label_b="after",
        )


def test_total_change_is_the_difference_of_the_kernel_times(nsys_diff):
    before = _kernel_ns(shared("nsys", "mfu_2gpu_before.sqlite"))
    after = _kernel_ns(shared("nsys", "mfu_2gpu_after.sqlite"))
    total_a, total_b = sum(t for _, t in before.values()), sum(t for _, t in after.values())
    assert nsys_diff.basis == "per run"  # neither export has a step range: said in the notes
    assert any("compared per run" in n for n in nsys_diff.notes)
    assert round(nsys_diff.total_a_us * 1000) == total_a and round(nsys_diff.total_b_us * 1000) == total_b
    assert round(nsys_diff.delta_us * 1000) == total_b - total_a
    assert nsys_diff.table["delta_us"].sum() == pytest.approx(nsys_diff.delta_us, abs=1e-3)
    assert nsys_diff.groups["delta_us"].sum() == pytest.approx(nsys_diff.delta_us, abs=1e-3)
    assert nsys_diff.table["share_pct"].sum() == pytest.approx(100.0)


def test_every_kernel_name_is_accounted_for_once(nsys_diff):
    before = _kernel_ns(shared("nsys", "mfu_2gpu_before.sqlite"))
    after = _kernel_ns(shared("nsys", "mfu_2gpu_after.sqlite"))
    t = nsys_diff.table
    assert t["name"].is_unique and set(t["name"]) == set(before) | set(after)
    by_status = {s: set(t.loc[t["status"] == s, "name"]) for s in ("appeared", "disappeared", "changed", "unchanged")}
    assert by_status["appeared"] == set(after) - set(before)
    assert by_status["disappeared"] == set(before) - set(after)
    assert by_status["changed"] | by_status["unchanged"] == set(before) & set(after)
    assert sum(len(v) for v in by_status.values()) == len(t) == sum(nsys_diff.counts.values())
    for name in set(before) & set(after):
        row = t[t["name"] == name].iloc[0]
        assert (row["count_a"], row["count_b"]) == (before[name][0], after[name][0])
        assert round(row["delta_us"] * 1000) == after[name][1] - before[name][1]


def test_three_largest_contributors_are_named(nsys_diff):
    before = _kernel_ns(shared("nsys", "mfu_2gpu_before.sqlite"))
    after = _kernel_ns(shared("nsys", "mfu_2gpu_after.sqlite"))
    delta = {n: after.get(n, (0, 0))[1] - before.get(n, (0, 0))[1] for n in set(before) | set(after)}
    largest = sorted(delta, key=lambda n: -abs(delta[n]))[:3]
    assert list(nsys_diff.top) == largest
    assert "attention kernels" in nsys_diff.summary and "per run" in nsys_diff.summary
    # copies are apart, and said
    assert set(nsys_diff.copies["name"]) >= {"Memcpy DtoD (Device -> Device)"}
    assert any("copies and sets" in n for n in nsys_diff.notes)
    # the two breakdowns side by side, per rank
    assert list(nsys_diff.temporal["rank"]) == [0, 1]
    assert {"a_idle_pct", "b_idle_pct"} <= set(nsys_diff.temporal.columns)
    assert set(nsys_diff.idle["idle_category"]) >= {"host_wait", "kernel_wait"}


def test_eager_and_compiled_names_the_fused_ops():
    import workbench as wb

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = wb.diff(PAIR / "eager.json.gz", PAIR / "compiled.json.gz", label_a="eager", label_b="compiled")
    assert d.unit == "op" and d.basis == "per ProfilerStep" and d.steps_a == d.steps_b == 3
    names = d.op_names.set_index("name")["status"]
    for fused in ("aten::mul", "aten::add", "aten::relu", "aten::sum"):
        assert names[fused] == "disappeared"
        assert fused in d.summary
    assert names["aten::mm"] in ("changed", "unchanged")  # by name it stays: moved under the compiled region
    assert names["Torch-Compiled Region: 0/0"] == "appeared"
    assert d.summary.startswith("compiled: fused into Torch-Compiled Region")
    # by call-tree place, mm moved: gone at its eager place, new under the compiled region
    paths = d.ops.set_index("path")["status"]
    assert paths["aten::matmul > aten::mm"] == "disappeared"
    assert any(
        p.startswith("Torch-Compiled Region") and p.endswith("aten::mm") and s == "appeared" for p, s in paths.items()
    )


def test_same_trace_is_all_unchanged_and_per_step():
    from workbench.analysis.diff import trace_diff
    from workbench.trace import read_trace

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = read_trace(DATA / "cpu" / "cpu_mlp_steps_memory.json.gz")
    d = trace_diff(t, t)
    assert d.basis == "per ProfilerStep" and d.delta_us == 0
    assert set(d.table["status"]) == {"unchanged"}


def test_no_step_in_common_is_said_and_compared_per_run():
    from workbench.analysis.diff import trace_diff
    from workbench.trace import read_trace

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stepped = read_trace(DATA / "cpu" / "cpu_mlp_steps_memory.json.gz")
        plain = read_trace(DATA / "cpu" / "cpu_mlp_plain.json.gz")
    d = trace_diff(stepped, plain, label_a="steps", label_b="plain")
    assert d.basis == "per run" and any("only steps has step annotations" in n for n in d.notes)


def test_gpu_kineto_against_nsys_and_rocprof_formats():
    """Any two supported formats compare: the kernel names that are in only one are appeared/disappeared."""
    import workbench as wb

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = wb.diff(DATA / "gpu" / "h100_bert_small.json.gz", shared("nsys", "h100_2gpu_1s.sqlite"))
    assert d.unit == "kernel" and d.source_b.startswith("nsys-sqlite")
    assert sum(d.counts.values()) == len(d.table)


def test_result_round_trips_and_renders():
    import workbench as wb
    from workbench.analysis.diff import TraceDiff

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = wb.diff(PAIR / "eager.json.gz", PAIR / "compiled.json.gz")
    back = TraceDiff.from_dict(d.to_dict())
    assert back.summary == d.summary and back.table.equals(d.table)
    html = wb.render.html(d)
    assert "<table" in html and "fused into" in html
    text = wb.render.text(d)
    assert "== largest changes (ops, per ProfilerStep) ==" in text
    assert "fused into" in d._repr_html_()


def test_waterfall_chart():
    import workbench as wb
    from workbench.charts.diff import diff_waterfall_chart, waterfall_table

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = wb.diff(PAIR / "eager.json.gz", PAIR / "compiled.json.gz", label_a="eager", label_b="compiled")
    bars = waterfall_table(d)
    assert len(bars) == len(d.groups) + 2 and bars["label"].is_unique
    assert bars["end_ms"].iloc[-2] == pytest.approx(d.total_b_us / 1000)  # the last step lands on b's total
    spec = diff_waterfall_chart(d).to_dict()
    assert spec["mark"]["type"] == "bar" and spec["encoding"]["y2"]["field"] == "end_ms"
    assert "eager -> compiled" in spec["title"]


def test_cli_diff_writes_text_json_and_page(tmp_path, capsys):
    from workbench.cli import main

    out = tmp_path / "d"
    assert (
        main(["diff", str(PAIR / "eager.json.gz"), str(PAIR / "compiled.json.gz"), "--out", str(out), "--top", "3"])
        == 0
    )
    text = capsys.readouterr().out
    assert "fused into" in text and "== change by group ==" in text
    assert {p.name for p in out.iterdir()} == {"diff.json", "diff.html", "waterfall.svg"}
    assert main(["diff", str(PAIR / "eager.json.gz"), str(tmp_path / "missing.json")]) == 2


def test_diff_refuses_what_is_not_a_trace():
    import workbench as wb
    from workbench.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="wb.diff compares traces"):
        wb.diff(object(), PAIR / "eager.json.gz")


def _with_nvtx_steps(source, target, n=2):
    """A copy of an nsys export with ``n`` NVTX ranges "step k" splitting each process's window."""
    import shutil

    shutil.copy(source, target)
    con = sqlite3.connect(target)
    busiest = {}
    for tid, calls in con.execute("SELECT globalTid, count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME GROUP BY globalTid"):
        if calls > busiest.get(tid >> 24, (0, 0))[1]:
            busiest[tid >> 24] = (tid, calls)
    threads = list(busiest.values())  # each process's launching thread
    lo, hi = con.execute("SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
    width = (hi - lo) // n
    for tid, _ in threads:
        for k in range(n):
            con.execute(
                "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES (?, ?, 59, ?, ?, 0)",
                (lo + k * width, lo + (k + 1) * width, f"step {k}", tid),
            )
    con.commit()
    con.close()
    return target


def test_nvtx_step_ranges_normalise_per_step(tmp_path):
    import workbench as wb

    a = _with_nvtx_steps(shared("nsys", "mfu_2gpu_before.sqlite"), tmp_path / "a.sqlite")
    b = _with_nvtx_steps(shared("nsys", "mfu_2gpu_after.sqlite"), tmp_path / "b.sqlite")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ta, tb = wb.load_trace(a, workers=1, cache=False), wb.load_trace(b, workers=1, cache=False)
        d = wb.diff(ta, tb)
    assert "annotations.step" not in ta.meta.fidelity
    steps = ta.annotations[ta.annotations["kind"] == "step"]
    assert sorted(set(steps["step"])) == [0, 1]
    assert d.basis == "per NVTX step range" and d.steps_a == d.steps_b == 2
    k = ta.kernels[(ta.kernels["kind"] == "kernel")]
    # per step: the kernels launched inside a step (a kernel whose launch is not in the window: by its own
    # start), over the number of steps
    at = k["launch_ts_us"].where(k["launch_ts_us"].notna(), k["ts_us"])
    inside = 0.0
    for rank, s in steps.groupby("rank"):
        mine = k["rank"] == rank
        for t0, t1 in zip(s["ts_us"], s["end_us"]):
            inside += k.loc[mine & (at >= t0) & (at <= t1), "dur_us"].sum()
    assert d.total_a_us == pytest.approx(inside / 2)


def test_kernels_replaced_by_triton_kernels_are_said(tmp_path):
    """The same GPU trace with its elementwise kernels renamed as Triton ones: "N elementwise kernels replaced
    by N triton kernels", the GEMMs unchanged."""
    import gzip
    import re

    import workbench as wb

    source = DATA / "gpu" / "h100_bert_small.json.gz"
    text = gzip.decompress(source.read_bytes())
    names = set(re.findall(rb'"name": "(void at::native::[a-z_]*elementwise_kernel[^"]*)"', text))
    assert names
    for i, name in enumerate(sorted(names)):
        text = text.replace(b'"' + name + b'"', b'"triton_poi_fused_%d"' % i)
    changed = tmp_path / "compiled.json"
    changed.write_bytes(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = wb.diff(source, changed, label_a="eager", label_b="compiled")
    gone = d.table[d.table["status"] == "disappeared"]
    assert set(gone["family"]) == {"elementwise"} and len(gone) == len(names)
    n = int(gone["count_a"].sum())
    assert f"{n} elementwise kernel" in d.summary and "replaced by" in d.summary and "triton kernel" in d.summary
    assert d.delta_us == pytest.approx(0.0, abs=1e-6)  # a rename moves no time
