"""``%gpustudy``: run a round of a ``wb.Study`` from a notebook line, accept a kept variant, or show
the study's current state.

    %gpustudy study                                    # the study now: baseline, hypotheses, last round, ledger
    %gpustudy study compiled=wb.variants.compiled(f) mine=g -b 2
    %gpustudy study --accept compiled

Plumbing only: STUDY and every EXPR are evaluated in the notebook's namespace, and the library
does the rest (``study.run_round``, ``study.accept``). The round is bound to ``_gpustudy`` (and to
``-o VAR``) and displayed with its summary. An expression with spaces goes in quotes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from workbench.magics.cell import magic_shell

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from workbench.study.baseline import Baseline
    from workbench.study.study import Study, StudyRound

LAST_ROUND_NAME = "_gpustudy"


def unquote(text: str) -> str:
    """The text without one pair of surrounding quotes (IPython's argument split keeps them)."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _evaluate(shell: InteractiveShell, expr: str, what: str) -> Any:
    expr = unquote(expr)
    try:
        return eval(expr, shell.user_global_ns, shell.user_ns)
    except Exception as exc:  # noqa: BLE001 - the user's expression: say which one failed
        raise UsageError(f"%gpustudy: {what} {expr!r} could not be evaluated ({type(exc).__name__}: {exc})") from None


def parse_variants(shell: InteractiveShell, items: list[str]) -> dict[str, Any]:
    """``NAME=EXPR`` items -> {name: the evaluated callable, Variant or registry name}."""
    out: dict[str, Any] = {}
    for item in items:
        name, sep, expr = unquote(item).partition("=")
        name = name.strip()
        if not sep or not name.isidentifier() or not expr.strip():
            raise UsageError(
                f"%gpustudy: each variant is NAME=EXPR (e.g. compiled=wb.variants.compiled(f)); got {item!r}"
            )
        if name in out:
            raise UsageError(f"%gpustudy: the variant {name!r} is named twice")
        out[name] = _evaluate(shell, expr, f"the variant {name!r}:")
    return out


@magics_class
class GpuStudyMagics(Magics):
    @magic_arguments()
    @argument("study", help="the name of a wb.Study in the notebook's namespace")
    @argument(
        "variants",
        nargs="*",
        metavar="NAME=EXPR",
        help="the round's one-factor variants: a name and an expression giving a callable, a "
        "wb.variants Variant or a registry name (quote an expression with spaces)",
    )
    @argument(
        "--accept",
        metavar="NAME",
        default=None,
        help="make the kept variant NAME of the last round the new baseline (re-profiled)",
    )
    @argument("-b", "--budget", type=float, default=None, help="timing budget of the round in seconds")
    @argument("-c", "--checks", type=int, default=None, help="correctness checks per variant")
    @argument(
        "--sweep",
        metavar="EXPR",
        default=None,
        help="make(shape, dtype) -> the argument tuple: a shape sweep before a keep",
    )
    @argument(
        "-O",
        "--options",
        metavar="EXPR",
        default=None,
        help='a dict of further study.run_round / wb.compare options, e.g. "dict(confidence=0.99)"',
    )
    @argument("-o", "--output", metavar="VAR", default=None, help="bind the round to this variable too")
    @line_magic
    def gpustudy(self, line: str) -> Baseline | Study | StudyRound:
        """Run a round of a study (``%gpustudy STUDY NAME=EXPR ...``), accept a kept variant
        (``%gpustudy STUDY --accept NAME``), or show the study (``%gpustudy STUDY``)."""
        __tracebackhide__ = True
        from workbench.study.study import Study

        opts = parse_argstring(self.gpustudy, line)
        study = _evaluate(magic_shell(self), opts.study, "the study")
        if not isinstance(study, Study):
            raise UsageError(
                f"%gpustudy: {opts.study!r} is a {type(study).__name__}, not a wb.Study; create one "
                f"with study = wb.Study(name, folder=...) and study.set_baseline(fn, make_inputs)"
            )
        if opts.output is not None and not opts.output.isidentifier():
            raise UsageError(f"-o needs a Python variable name; got {opts.output!r}")
        if opts.accept is not None:
            if opts.variants:
                raise UsageError("%gpustudy: --accept takes no variants; run the round first, then accept")
            return study.accept(opts.accept)
        if not opts.variants:
            return study
        options: dict[str, Any] = {}
        if opts.options is not None:
            extra = _evaluate(magic_shell(self), opts.options, "the options")
            if not isinstance(extra, dict):
                raise UsageError(f"%gpustudy: -O/--options must give a dict; got {type(extra).__name__}")
            options.update(extra)
        if opts.budget is not None:
            options["budget_s"] = opts.budget
        if opts.checks is not None:
            options["checks"] = opts.checks
        if opts.sweep is not None:
            options["sweep"] = _evaluate(magic_shell(self), opts.sweep, "the sweep")
        rnd = study.run_round(parse_variants(magic_shell(self), opts.variants), **options)
        magic_shell(self).user_ns[LAST_ROUND_NAME] = rnd
        if opts.output:
            magic_shell(self).user_ns[opts.output] = rnd
        return rnd
