"""One allocator mode for every timed process (workbench.capture.allocator).

The pin lasts for the rest of a process, so every pin is made in a child process; whether it took
is read from glibc itself (``mallinfo2().hblkhd``: the bytes in buffers that got their own mmap).
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import workbench.capture.allocator as allocator
from workbench.capture.health import MachineState, ProfileHealth, check_health
from workbench.errors import InvalidArgumentError
from workbench.measurement import Measurement
from workbench.report import sampler

glibc = pytest.mark.skipif(allocator._glibc() is None, reason="not applicable: the C library is not glibc")

# In a child: how a 20 MiB buffer is served (its own mmap, or the heap) after an optional pin.
CHILD = textwrap.dedent("""
    import ctypes, json, sys
    import workbench.capture.allocator as allocator
    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in
                    "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
    pinned = allocator.pin_steady().to_dict() if sys.argv[1] == "pin" else None
    before = libc.mallinfo2().hblkhd
    buffer = libc.malloc(20 * 2**20)
    mapped = libc.mallinfo2().hblkhd - before
    print(json.dumps({"pinned": pinned, "mapped_bytes": mapped, "mode": allocator.current_mode().to_dict()}))
""")


def _child(arg: str, **env: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if k not in allocator.steady_env()}
    environ.update(env)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, arg], capture_output=True, text=True, env=environ, timeout=120, check=True
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


@glibc
def test_a_default_process_maps_a_large_buffer_of_its_own():
    out = _child("none")
    assert out["mapped_bytes"] >= 20 * 2**20
    assert out["mode"]["name"] == "default" and not out["mode"]["applied"]


@glibc
def test_pinning_serves_buffers_up_to_32_mib_from_the_heap():
    out = _child("pin")
    assert out["pinned"]["applied"] and out["pinned"]["source"] == "mallopt"
    assert out["pinned"]["settings_bytes"]["mmap_threshold"] == 32 * 2**20
    assert out["mapped_bytes"] == 0
    assert out["mode"]["name"] == "steady"


@glibc
def test_a_child_started_with_the_steady_environment_is_pinned_from_its_start():
    out = _child("none", **allocator.steady_env())
    assert out["mapped_bytes"] == 0
    assert out["mode"] == {**out["mode"], "name": "steady", "applied": True, "source": "environment"}


def test_a_half_set_environment_is_not_called_steady():
    env = dict(allocator.steady_env())
    env.pop("MALLOC_TOP_PAD_")
    assert allocator.current_mode(env).name == "default"


def test_the_mode_to_use_comes_from_the_argument_then_the_environment():
    assert allocator.requested_mode(None, {}) == "steady"
    assert allocator.requested_mode(None, {"WORKBENCH_ALLOCATOR": "default"}) == "default"
    assert allocator.requested_mode("steady", {"WORKBENCH_ALLOCATOR": "default"}) == "steady"
    with pytest.raises(InvalidArgumentError, match="WORKBENCH_ALLOCATOR must be one of steady, default; got 'fast'"):
        allocator.requested_mode(None, {"WORKBENCH_ALLOCATOR": "fast"})
    with pytest.raises(InvalidArgumentError, match="allocator mode must be one of"):
        allocator.requested_mode("pinned")


def test_workers_get_the_steady_environment_only_in_steady_mode(monkeypatch):
    for name in allocator.steady_env():
        monkeypatch.delenv(name, raising=False)
    steady = sampler._worker_env("steady")
    assert all(steady[k] == v for k, v in allocator.steady_env().items())
    assert not set(allocator.steady_env()) & set(sampler._worker_env("default"))


def test_the_mode_is_part_of_the_environment_the_gate_compares():
    fingerprint = {"host": {"cpu_model": "x"}, "torch": {"version": "2"}}
    assert sampler.gate_environment(fingerprint, "cpu", "steady")["allocator"] == "steady"
    from workbench.report.regression import environment_differences

    diffs = environment_differences({"allocator": "default"}, {"allocator": "steady"})
    assert diffs == ("allocator: 'default' vs 'steady'",)


def _timing() -> Measurement:
    return Measurement((1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.0))


def test_the_health_check_says_which_mode_the_calls_were_timed_in():
    steady = allocator.AllocatorMode(
        "steady", True, (("mmap_threshold", 32 * 2**20), ("trim_threshold", 2**30), ("top_pad", 64 * 2**20)), "mallopt"
    )
    machine = MachineState(
        load_avg_1m=0.1,
        usable_cores=2,
        torch_threads=1,
        omp_wait_policy="PASSIVE",
        allocator_mode="steady",
        allocator_label=steady.label,
    )
    health = check_health(_timing(), machine=machine)
    check = health.check("allocator")
    assert check is not None and check.level == "note"
    assert (
        "steady mode (glibc thresholds pinned: mmap above 32 MiB, trim above 1 GiB, top pad 64 MiB)" in check.observed
    )
    again = ProfileHealth.from_dict(health.to_dict())
    assert again.machine.allocator_mode == "steady" and again.check("allocator") == check

    plain = check_health(
        _timing(),
        machine=MachineState(load_avg_1m=0.1, usable_cores=2, allocator_mode="default", allocator_label="default mode"),
    )
    assert plain.check("allocator").level == "ok"
    # an older run's machine state (no mode recorded): no line at all rather than a guess
    assert check_health(_timing(), machine=MachineState(load_avg_1m=0.1, usable_cores=2)).check("allocator") is None


def test_a_mode_round_trips_and_bad_records_are_none():
    mode = allocator.AllocatorMode("steady", True, (("top_pad", 1),), "environment")
    assert allocator.AllocatorMode.from_dict(mode.to_dict()) == mode
    assert allocator.AllocatorMode.from_dict({"name": 3}) is None
    assert allocator.AllocatorMode.from_dict(None) is None
