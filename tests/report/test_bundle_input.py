"""A run bundle may only name files inside itself; fields a report shows as text must be text."""

import json

import pytest

import workbench as wb
from workbench.cli import main
from workbench.errors import BundleError


@pytest.fixture(scope="module")
def untraced_run():
    return wb.profile(lambda: None, warmup=0, repeat=3, trace=False, name="noop")


@pytest.fixture
def bundle(untraced_run, tmp_path):
    folder = untraced_run.save(tmp_path / "bundle")
    (folder / "trace.json.gz").write_bytes(b"")  # a file of the bundle's own, for the links below
    return folder


def _edit(folder, **changes):
    doc = json.loads((folder / "run.json").read_text())
    doc["run"].update(changes)
    (folder / "run.json").write_text(json.dumps(doc))


@pytest.mark.parametrize("name", ["/etc/passwd", "../../../etc/hostname", "../outside.json.gz", ".", ""])
def test_a_trace_outside_the_bundle_is_refused(bundle, name):
    (bundle.parent / "outside.json.gz").write_bytes(b"secret")
    _edit(bundle, trace_path=name)
    if name == "":  # no trace named: nothing to follow
        assert wb.load_run(bundle).trace is None
        return
    with pytest.raises(BundleError, match="outside the bundle; a bundle may only name files inside"):
        wb.load_run(bundle)


def test_a_link_out_of_the_bundle_is_refused(bundle, tmp_path):
    (tmp_path / "elsewhere.json.gz").write_bytes(b"x")
    (bundle / "link.json.gz").symlink_to(tmp_path / "elsewhere.json.gz")
    _edit(bundle, trace_path="link.json.gz")
    with pytest.raises(BundleError, match="outside the bundle"):
        wb.load_run(bundle)


@pytest.mark.parametrize(
    "field,value",
    [("name", 42), ("name", ["a"]), ("name", None), ("device", 0), ("created_at", {"t": 1}), ("trace_path", 7)],
)
def test_a_field_shown_as_text_must_be_text(bundle, field, value):
    _edit(bundle, **{field: value})
    with pytest.raises(BundleError, match="must be a|a file name inside the bundle"):
        wb.load_run(bundle)


def test_the_report_command_says_so_before_executing_the_template(bundle, tmp_path, capsys):
    _edit(bundle, name=12345)
    assert main(["report", "--bundle", str(bundle), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "has a name of type int" in err and "Traceback" not in err
    assert not (tmp_path / "r" / "report.ipynb").exists()
    _edit(bundle, name="noop", trace_path="/etc/passwd")
    assert main(["report", "--bundle", str(bundle), "--out", str(tmp_path / "r")]) == 2
    assert "outside the bundle" in capsys.readouterr().err
