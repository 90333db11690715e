"""Names as the terminal may show them: a file name is the user's (or an attacker's) text, and control
characters in it (an escape sequence, a carriage return, a newline) must never reach a terminal raw, where
they could recolour, rewrite or hide lines. Every message that shows a name goes through :func:`printable`.
"""
from __future__ import annotations

from os import PathLike


def printable(text: str | PathLike | object) -> str:
    """``text`` with every character that a terminal would not print as itself (control and format
    characters, line and paragraph separators) written as its Python escape (``\\n``, ``\\x1b``,
    ``\\u202e``); everything else, spaces and non-ASCII letters included, unchanged."""
    text = str(text)
    if text.isprintable():  # the common case, in one C call
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
