"""The context-parallel degrees the decision space searches (solvers/space.py), below the
families so that tp_domain's relaxation steps read the same list
(solvers/families/tp_domain.py)."""

from __future__ import annotations


def cp_options(seq_len: int) -> list[int]:
    """The CP degrees searched at ``seq_len``: powers of two up to 32, at least 4,096 tokens
    a rank (README "The optimizer", decision space)."""
    return [c for c in (1, 2, 4, 8, 16, 32) if c == 1 or seq_len >= 4096 * c]
