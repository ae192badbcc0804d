"""solvers/cpsat/context.py: which build stage sets which BuildContext fields (issue 32
item 2: the build order says itself). Read from the code with ``ast``: each stage named in
STAGES assigns its fields (in its own body or a helper of its module that it is the only
public caller of), and every field past the inputs is named by exactly one stage."""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

from solvers.cpsat.context import STAGES, BuildContext

SOLVERS = Path(__file__).resolve().parent.parent / "solvers" / "cpsat"
INPUTS = 8  # md ... terms: set by model._build (solvers/cpsat/model.py) when it makes the context


def assigned(path: Path) -> dict[str, set[str]]:
    """Function name -> the ``ctx.<field>`` it assigns (``ctx.a = ``, ``ctx.a, ctx.b = ``,
    ``ctx.a[k] = ``), in one module."""
    out: dict[str, set[str]] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        found: set[str] = set()
        for sub in ast.walk(node):
            targets = sub.targets if isinstance(sub, ast.Assign) else []
            for target in targets:
                for e in ast.walk(target):
                    if isinstance(e, ast.Subscript):
                        e = e.value
                    if isinstance(e, ast.Attribute) and getattr(e.value, "id", None) == "ctx":
                        found.add(e.attr)
        out[node.name] = found
    return out


def test_every_field_past_the_inputs_is_set_by_one_stage():
    named = [f for _, fs in STAGES for f in fs]
    assert len(named) == len(set(named)), "a field named by two stages"
    own = [f.name for f in fields(BuildContext)][INPUTS:]
    assert [f.name for f in fields(BuildContext)][INPUTS - 1] == "terms"
    assert sorted(named) == sorted(own)


def test_each_stage_sets_its_fields():
    for stage, names in STAGES:
        module, func = stage.split(".")
        by_function = assigned(SOLVERS / f"{module}.py")
        assert func in by_function, stage
        # its own body, or the module's private helpers (e.g. time._per_sequence)
        helpers = set().union(*(v for k, v in by_function.items() if k.startswith("_")))
        for name in names:
            assert name in by_function[func] | helpers, f"{stage} does not set {name}"


def test_the_stages_run_in_their_order():
    """model._build (solvers/cpsat/model.py) calls the stages (or the part that runs them) in STAGES' order."""
    source = (SOLVERS / "model.py").read_text(encoding="utf-8")
    body = source[source.index("def _build(") : source.index("def _time(")]
    calls = [s.split(".")[1] for s, _ in STAGES if s.split(".")[1] != "_build"]
    inside_time = {"add_time", "add_goodput"}  # run by _time
    on_demand = {"tco_rates"}  # set by the first stage that asks (the goodput or the cost)
    at = [body.index(f"{c}(ctx)") for c in calls if c not in inside_time | on_demand]
    assert at == sorted(at)
