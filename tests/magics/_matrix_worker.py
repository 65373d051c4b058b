"""The magic failure matrix, run in its own process (a segfault there fails the test, it does not
take the test session with it).  Each case runs one cell through a real IPython shell, then the
shell's state is read: streams, display publisher, profiler, torch settings, namespace, and
whether the next magic (and a plain print) still works.  Prints one JSON object per case.

Usage: python -m tests.magics._matrix_worker OUT.json
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

HELPER = "def helper_with_profiler(t):\n    with torch.profiler.profile():\n        return t.sin()\n"

# name -> (cell, expect_success, text the cell's output must contain (or None))
CASES: dict[str, tuple[str, bool, str | None]] = {
    "success": ("%%gpuprofile -w 1 -r 3 -q\ny = x.sin()", True, None),
    "exception": ("%%gpuprofile -w 1 -r 3\npartial = 1\n1 / 0", False, None),
    "syntax_error": ("%%gpuprofile -w 1 -r 3\ny = (x.sin(", False, "syntax error"),
    "sys_exit_mid_repeats": (
        "%%gpuprofile -w 1 -r 4\nn_calls += 1\nif n_calls == 4:\n    import sys; sys.exit(3)",
        False,
        "sys.exit",
    ),
    "keyboard_interrupt_mid_repeats": (
        "%%gpuprofile -w 1 -r 6\nn_calls += 1\nif n_calls == 5:\n"
        "    import signal; signal.raise_signal(signal.SIGINT)\n"
        "y = x.sin()",
        False,
        None,
    ),
    "own_profiler_in_cell": (
        "%%gpuprofile -w 1 -r 3 -q\nwith torch.profiler.profile() as p:\n    y = x.sin()",
        True,
        "timed only",
    ),
    "own_profiler_in_a_function": ("%%gpuprofile -w 1 -r 3 -q\nhelper_with_profiler(x)", True, "two profilers at once"),
    "leaves_a_profiler_running": (
        "%%gpuprofile -w 1 -r 3 -q\nleft = torch.profiler.profile()\nleft.start()\ny = x.sin()",
        None,
        "profiler",
    ),
    "nested_magic": ("%%gpuprofile -w 1 -r 2 -q\ny = x.sin()\n%gpuprofile -w 0 -r 2 -q x.cos()", True, None),
    "changes_torch_settings": (
        "%%gpuprofile -w 0 -r 2 -q\ntorch.set_num_threads(2)\ntorch.set_grad_enabled(False)",
        True,
        "put back",
    ),
    "replaces_stdout": (
        "%%gpuprofile -T -w 0 -r 2 -q\nimport io, sys\nsys.stdout = io.StringIO()",
        True,
        "replaced sys.stdout",
    ),
    "huge_output": ("%%gpuprofile -T -w 1 -r 3 -q\nprint('x' * 2_000_000)", True, None),
    "variant_success": ("%%gpuvariant sin2 -b 0.3 -c 1\ny = x.sin()", True, "Decision"),
    # a compared cell that fails is the comparison's finding (a row "error: ..."), not the magic's
    "variant_raises": (
        "%%gpuvariant broken -b 0.3 -c 1\ny = x.sin()\nraise ValueError('variant is broken')",
        True,
        "variant is broken",
    ),
    "variant_syntax_error": ("%%gpuvariant bad -b 0.3 -c 1\ny = (x.sin(", False, "syntax error"),
    "variant_sys_exit": ("%%gpuvariant leaves -b 0.3 -c 1\ny = x.sin()\nimport sys; sys.exit(1)", None, "sys.exit"),
    # a cell that binds nothing the profiled one binds, with no last value: refused before anything runs
    "variant_nothing_to_compare": (
        "%%gpuvariant nothing -b 0.3 -c 1\nx.sin()\nz = 1\nfor _ in range(1):\n    pass",
        False,
        "nothing to compare",
    ),
    "variant_keyboard_interrupt": (
        "%%gpuvariant stop -b 0.3 -c 1\nimport signal; signal.raise_signal(signal.SIGINT)",
        False,
        None,
    ),
}


def main(out_path: str) -> None:
    import signal

    # Ctrl-C in a user's shell is a KeyboardInterrupt. A process started in the background by a
    # non-interactive shell (`make test &`, nohup, some CI runners) inherits SIGINT ignored, and Python
    # then leaves it ignored: the interrupt cases would run to the end. Python's own handler goes back.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import torch
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    torch.set_num_threads(1)
    shell = InteractiveShell.instance()
    shell.run_cell("%load_ext workbench", store_history=True).raise_error()
    shell.run_cell(
        "import torch\nx = torch.randn(20_000)\nsentinel = object()\nn_calls = 0\n" + HELPER, store_history=True
    ).raise_error()
    shell.run_cell("%%gpuprofile -T -w 0 -r 2 -q\ny = x.sin()", store_history=True).raise_error()
    results = {}
    for name, (cell, expect_success, expect_text) in CASES.items():
        shell.user_ns["n_calls"] = 0
        before = dict(
            stdout=sys.stdout,
            stderr=sys.stderr,
            pub=shell.display_pub,
            keys=set(shell.user_ns),
            sentinel=shell.user_ns["sentinel"],
            run=shell.user_ns.get("_gpuprofile"),
        )
        with capture_output() as shown:  # what the user would see, for the case's message check
            res = shell.run_cell(cell, store_history=True)
        seen = shown.stdout + shown.stderr + "".join(str(o.data) for o in shown.outputs)
        state = {
            "success": bool(res.success),
            "error": repr(res.error_in_exec or res.error_before_exec)[:300],
            "stdout_restored": sys.stdout is before["stdout"],
            "stderr_restored": sys.stderr is before["stderr"],
            "display_pub_restored": shell.display_pub is before["pub"],
            "profiler_stopped": not torch.autograd._profiler_enabled(),
            "threads": torch.get_num_threads(),
            "grad_enabled": torch.is_grad_enabled(),
            "names_kept": sorted(before["keys"] - set(shell.user_ns)),
            "sentinel_kept": shell.user_ns.get("sentinel") is before["sentinel"],
            "failed_run_kept_previous": res.success or shell.user_ns.get("_gpuprofile") is before["run"],
            "expect_success": expect_success,
            "expected_text_shown": expect_text is None or expect_text in seen,
            "shown": seen[-600:],
        }
        with capture_output() as after:
            nxt = shell.run_cell("%%gpuprofile -w 0 -r 2 -q\nprobe = x.cos()\nprint('alive')", store_history=True)
        state["next_magic_works"] = bool(nxt.success) and after.stdout.count("alive") == 1
        state["streams_after_next"] = (
            sys.stdout is before["stdout"] and sys.stderr is before["stderr"] and shell.display_pub is before["pub"]
        )
        results[name] = state
        # put the profiled cell back for the variant cases
        shell.run_cell("%%gpuprofile -T -w 0 -r 2 -q\ny = x.sin()", store_history=True).raise_error()
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
