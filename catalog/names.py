"""The one message for a name that is not among the known ones (a GPU, NIC, switch, model
or constraint family): the names there are and, where some are close, those."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

CLOSE_NAME_CUTOFF = 0.8
"""difflib's similarity ratio a known name must reach to be suggested when none starts
with the given one ("memroy" -> "memory" at 0.83, "deepseekv3" -> "deepseek-v3" at 0.95;
"h900" is 0.75 from both "h200" and "h800" and suggests neither)."""
MAX_SUGGESTIONS = 3


def close_names(name: str, known: Iterable[str]) -> list[str]:
    """The known names ``name`` most likely means, compared in lower case: the one equal to
    it, else those it begins ("h100" -> "h100-pcie", "h100-sxm"; at most MAX_SUGGESTIONS),
    else the most similar one above CLOSE_NAME_CUTOFF; none when nothing is close. In the
    order ``known`` gives them."""
    names = list(known)
    low = name.lower()
    same = [k for k in names if k.lower() == low]
    if same:
        return same[:1]
    starts = [k for k in names if low and k.lower().startswith(low)]
    if starts:
        return starts[:MAX_SUGGESTIONS]
    return difflib.get_close_matches(low, names, n=1, cutoff=CLOSE_NAME_CUTOFF)


def unknown_name(kind: str, name: str, known: Iterable[str]) -> str:
    """The one-line message, e.g. unknown GPU 'h100'; did you mean 'h100-pcie' or
    'h100-sxm'? choose one of a100-40gb, ..."""
    names = sorted(known)
    close = close_names(name, names)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return f"unknown {kind} {name!r}; {hint}choose one of {', '.join(names)}"
