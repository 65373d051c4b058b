"""``--explain``: ``torch._dynamo.explain`` on the call a ``%gpuprofile`` line profiles.

The line's code must be one call, ``f(x, y=z)``: the callee and its arguments are evaluated in
the user's namespace, a ``torch.compile``'d callee is unwrapped to the function it compiles, and
dynamo traces it (no inductor compile: seconds) to count graphs and name the graph breaks.
``explain`` resets dynamo's caches before and after: compiled functions compile again on their
next call (from the inductor cache, seconds), which is why it is opt-in and runs after profiling.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell


@dataclass(frozen=True)
class Explanation:
    """What dynamo made of the call: graphs, breaks and why, ops captured."""

    callee: str
    graph_count: int
    graph_break_count: int
    op_count: int
    break_reasons: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "callee": self.callee,
            "graph_count": self.graph_count,
            "graph_break_count": self.graph_break_count,
            "op_count": self.op_count,
            "break_reasons": list(self.break_reasons),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Explanation":
        return cls(
            d["callee"], d["graph_count"], d["graph_break_count"], d["op_count"], tuple(d.get("break_reasons", ()))
        )

    def summary(self) -> str:
        lines = [
            f"torch._dynamo.explain({self.callee}): {self.graph_count} graph(s), "
            f"{self.graph_break_count} graph break(s), {self.op_count} op(s) captured"
        ]
        lines += [f"  break: {reason}" for reason in self.break_reasons]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()


def parse_call(code: str) -> ast.Call:
    """The line's code as one call node; a UsageError that shows the form otherwise."""
    try:
        tree = ast.parse(code.strip(), mode="eval")
    except SyntaxError:
        tree = None
    if tree is None or not isinstance(tree.body, ast.Call):
        raise UsageError(
            f"--explain needs the line to be one call, like `%gpuprofile --explain f(x)`; got {code.strip()!r}"
        )
    return tree.body


def _evaluate(shell: InteractiveShell, node: ast.expr) -> Any:
    code = compile(ast.Expression(node), "<gpuprofile --explain>", "eval")
    return eval(code, shell.user_global_ns, shell.user_ns)


def _unwrap(fn: Any) -> Any:
    """The function a torch.compile wrapper compiles (explain needs the original)."""
    inner = getattr(fn, "_torchdynamo_orig_callable", None) or getattr(fn, "_orig_mod", None)
    return fn if inner is None else inner


def explain_call(shell: InteractiveShell, code: str) -> Explanation:
    """Run ``torch._dynamo.explain`` on the call in ``code`` (see the module docstring)."""
    import torch

    call = parse_call(code)
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        raise UsageError("--explain: write the call's arguments out (no *args / **kwargs unpacking)")
    fn = _unwrap(_evaluate(shell, call.func))
    args = [_evaluate(shell, a) for a in call.args]
    kwargs = {k.arg: _evaluate(shell, k.value) for k in call.keywords if k.arg is not None}
    out = torch._dynamo.explain(fn)(*args, **kwargs)
    reasons = tuple(str(getattr(r, "reason", r)).strip().splitlines()[0] for r in out.break_reasons)
    return Explanation(
        ast.unparse(call.func), int(out.graph_count), int(out.graph_break_count), int(out.op_count), reasons
    )
