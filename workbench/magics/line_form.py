"""The line form of a magic: ``%gpuprofile -r 10 f(x)`` -> options ``-r 10`` and code ``f(x)``.

The options come first; the code is the rest of the line, kept verbatim (so ``f(x, -1)`` or
``g(a='-r')`` are not read as options).  An option's value is taken from the parser's own
definition (``store_true`` flags take none), so the split follows the magic's argument list.
"""

from __future__ import annotations

import argparse
import re

_TOKEN = re.compile(r"\S+")


def split_options(parser: argparse.ArgumentParser, line: str) -> tuple[str, str]:
    """``(options, code)``: the leading option tokens of ``line`` and the verbatim remainder."""
    actions = parser._option_string_actions  # argparse's map: "-r" / "--repeat" -> action
    tokens = list(_TOKEN.finditer(line))
    i = 0
    while i < len(tokens):
        text = tokens[i].group()
        name = text.split("=", 1)[0]
        if not text.startswith("-") or name not in actions:
            break
        takes_value = actions[name].nargs != 0 and "=" not in text
        i += 2 if takes_value else 1
    if i >= len(tokens):
        return line.strip(), ""
    start = tokens[i].start()
    return line[:start].strip(), line[start:].strip()
