"""Option text read as lists."""

from __future__ import annotations


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
