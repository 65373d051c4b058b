"""The status line of a long magic: the phase of each call, published off the timed path."""

from __future__ import annotations

import time

from workbench.magics.progress import StatusLine, phase


def test_phases_follow_the_calls():
    w, r = 2, 3
    assert phase(0, False, w, r, True).startswith("cold call")
    assert phase(1, False, w, r, True) == "warm-up 1/2"
    assert phase(2, False, w, r, True) == "warm-up 2/2"
    assert phase(3, False, w, r, True) == "timed repeat 1/3"
    assert phase(5, False, w, r, True) == "timed repeat 3/3"
    assert phase(5, True, w, r, True).startswith("starting the traced pass")
    assert phase(6, False, w, r, True) == "traced pass, call 1"
    assert phase(7, True, w, r, True) == "parsing the trace"
    assert phase(5, True, w, r, False) == "timed repeat 3/3"  # no trace: no traced pass


class _Guard:
    shell = None

    def __init__(self):
        self.published = []

    def publish_now(self, data, **kwargs):
        self.published.append((data["text/plain"], kwargs["transient"]["display_id"], kwargs["update"]))


def test_the_line_shows_after_the_delay_updates_in_place_and_ends_with_what_was_done():
    guard = _Guard()
    line = StatusLine(guard, "%gpuprofile cell[3]", 1, 2, True, delay_s=0.05, every_s=0.02, enabled=True).start()
    line.on_call(2, False)
    deadline = time.monotonic() + 10
    while len(guard.published) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    line.close("%gpuprofile cell[3]: done")
    texts = [t for t, _, _ in guard.published]
    assert "timed repeat 1/2" in texts[0] and texts[-1] == "%gpuprofile cell[3]: done"
    assert len({d for _, d, _ in guard.published}) == 1  # one display, updated
    assert [u for _, _, u in guard.published] == [False] + [True] * (len(texts) - 1)


def test_a_short_magic_shows_nothing():
    guard = _Guard()
    line = StatusLine(guard, "x", 0, 1, False, delay_s=5.0, enabled=True).start()
    line.close("done")
    assert guard.published == []
    off = StatusLine(guard, "x", 0, 1, False, delay_s=0.0)  # no kernel: a terminal, off
    assert off.enabled is False
