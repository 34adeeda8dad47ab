"""Option text read as lists, and help text without its reST markup."""

from __future__ import annotations

import re


def split_list(text: str) -> list[str]:
    """Comma- or line-separated items; a comma inside brackets belongs to its item (a library
    model's list override: ``transformers:MobileViTModel?hidden_sizes=[32,48,64]``)."""
    items, depth, current = [], 0, []
    for ch in text.replace("\n", ","):
        depth += (ch in "[(") - (ch in "])" and depth > 0)
        if ch == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(ch)
    items.append("".join(current))
    return [p.strip() for p in items if p.strip()]


# reST inline markup that docstrings carry and a terminal shows as it is: a role (:func:`x`,
# :mod:`~a.b`) and a literal (double backquotes). A single backquote stays: help text uses it
# as Markdown does, and docs/reference renders it.
_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`(~)?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")


def plain(text: str) -> str:
    """``text`` without reST inline markup: a role (``:func:`x```) and a literal
    (````x````) read ``x``; ``:mod:`~a.b``` reads ``b``, as Sphinx shows it."""
    text = _ROLE.sub(lambda m: m[2].rsplit(".", 1)[-1] if m[1] else m[2], text)
    return _LITERAL.sub(r"\1", text)
