"""``workbench rules [NAME]``: the diagnosis's rules, their thresholds and what each can say."""

from __future__ import annotations

import argparse

DESCRIPTION = """\
List the rules the diagnosis runs: each rule's category, whether it reads a trace or a profiled run,
its thresholds and its branches. With NAME: that rule whole, with the words of each branch as
templates ({share_pct:.0f} where a number goes), its optional clauses and conditional confounders.
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "rules",
        help="list the diagnosis's rules, their thresholds and words",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("name", nargs="?", default=None, help="one rule's name (default: all, one line each)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from workbench.hypotheses.catalog import get_rule, list_rules
    from workbench.render import rules as render_rules

    print(render_rules.rule(get_rule(args.name)) if args.name else render_rules.catalog(list_rules()))
    return 0
