"""bench/cli_parity.py: `designer evaluate`, given a bench row's options as README.md documents
them, predicts the step time the accuracy benches predict for the row (bench/accuracy.py's
published rows, bench/moe_accuracy.py's Grok-1, independent and DeepSeek-V3 rows, the vTrain
rows): a held-out set is scored through the command line, the benches call the library.

Where a bench sets a knob no option reaches (the Grok-1 recipe's bf16 gradient buffers, a
dropless row's fitted expert load, the DeepSeek-V3 report's fp32 gradients), the command line
must give the bench's prediction with that knob at its default, and differ from the bench's:
the gap is that knob's, and only that knob's."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import load_bench

parity = load_bench("cli_parity.py", "cli_parity")
REL = 1e-9  # both sides run models.evaluate on the same inputs: equal to rounding


@pytest.fixture(scope="module")
def all_cases():
    return parity.cases(("dense", "grok", "moe", "deepseek"))


def _has(case, *flags: str) -> bool:
    return all(f in case.args for f in flags)


def _value(case, flag: str) -> str | None:
    return case.args[case.args.index(flag) + 1] if flag in case.args else None


HAS = ""  # in SAMPLE: the flag is given, whatever its value
SAMPLE = {  # what the row is: its set and the options that find it (the first such row)
    "dense h100 bf16": ("dense", {"--gpu": "h100-sxm", "--precision": "bf16"}),
    "dense h100 fp8": ("dense", {"--gpu": "h100-sxm", "--precision": "fp8"}),
    "dense b200 fp8": ("dense", {"--gpu": "b200", "--precision": "fp8"}),
    "dense gb200 (4 NICs)": ("dense", {"--gpu": "gb200", "--nics-per-node": "4"}),
    "dense a100 full recompute": ("dense", {"--gpu": "a100-80gb", "--recompute": "full"}),
    "dense mi300x": ("dense", {"--gpu": "mi300x"}),
    "dense interleaved (vp 5)": ("dense", {"--vp": "5"}),
    "dense embedding and loss in the split": ("dense", {"--embedding-in-split": HAS}),
    "dense context parallel 2": ("dense", {"--cp": "2"}),
    "dense FSDP2 (ZeRO-3)": ("dense", {"--zero": "3"}),
    "moe pipeline-layout string": ("moe", {"--pipeline-layout": HAS}),
    "moe layout without m": ("moe", {"--pipeline-layout": HAS, "--mtp-layers": "0"}),
    "moe a2a overlap": ("moe", {"--moe-overlap": "a2a"}),
    "moe hybridep": ("moe", {"--dispatcher": "hybridep"}),
    "moe fp8": ("moe", {"--precision": "fp8"}),
    "moe capacity factor": ("moe", {"--capacity-factor": "1.0"}),
    "moe unfused permutation": ("moe", {"--no-permute-fusion": HAS}),
    "moe recompute modules": ("moe", {"--recompute-modules": HAS}),
    "moe zero 3": ("moe", {"--zero": "3"}),
    "grok-1 proxy fp8": ("grok", {"--precision": "fp8"}),
    "deepseek-v3 report": ("deepseek", {}),
}


def _matches(case, kind: str, flags: dict[str, str]) -> bool:
    return case.set == kind and all(
        f in case.args and (v == HAS or _value(case, f) == v) for f, v in flags.items()
    )


def _check(case, tmp_path: Path) -> None:
    out = parity.run_case(case, tmp_path, 0)
    assert out.cli_s is not None, f"{case.name}: refused ({out.code}): {out.error}"
    assert out.code in (0, 1)  # 1: priced and marked infeasible (memory, the TP rule)
    if case.neutral is None:
        assert out.cli_s == pytest.approx(case.bench_s, rel=REL), case.name
    else:  # a bench-only knob: the CLI is the bench at the knob's default, and only that
        assert out.cli_s == pytest.approx(case.neutral(), rel=REL), (case.name, case.knob)
        assert out.cli_s != pytest.approx(case.bench_s, rel=1e-6), (case.name, case.knob)


@pytest.mark.parametrize("what", sorted(SAMPLE))
def test_a_sampled_row_evaluates_from_the_command_line_as_the_bench_predicts(
    all_cases, what, tmp_path
):
    found = [c for c in all_cases if _matches(c, *SAMPLE[what])]
    assert found, f"no bench row is {what}"
    _check(found[0], tmp_path)


def test_a_dropless_row_evaluates_as_the_bench_at_load_one(all_cases, tmp_path):
    """The bench's fitted expert_load has no option: the command line gives load 1.0."""
    case = next(c for c in all_cases if c.knob.startswith("expert_load"))
    _check(case, tmp_path)


def test_a_vtrain_row_evaluates_on_its_stack_as_the_bench_predicts(tmp_path):
    case = next(iter(parity.vtrain_cases()))
    assert _value(case, "--stack") == "vtrain-2022" and _has(case, "--no-sequence-parallel")
    _check(case, tmp_path)


def test_the_bench_only_knobs_are_the_known_ones(all_cases):
    """The rows that carry a knob no option reaches: every Grok-1 row, the dropless rows
    with a fitted load, the DeepSeek-V3 report row (README text proposed for each)."""
    knobs = {c.knob.split(" ")[0] for c in all_cases if c.knob}
    assert knobs == {"wgrad_accumulation_bytes", "expert_load", "REPORT_ASSUMPTIONS:"}
    assert all(c.knob for c in all_cases if c.set in ("grok", "deepseek"))
    assert not any(c.knob for c in all_cases if c.set == "dense")


@pytest.mark.slow
def test_every_row_evaluates_from_the_command_line_as_the_bench_predicts():
    """All 1,756 rows (vTrain's 1,549 among them), about 6 s: none refused, every
    difference a bench-only knob's."""
    outcomes = parity.run_all()
    assert not [(o.case.name, o.error) for o in outcomes if o.cli_s is None]
    differing = [o for o in outcomes if abs(o.rel) > parity.TOLERANCE]
    assert not [o.case.name for o in differing if not parity.cause(o).startswith("bench-only")]
    assert all(abs(o.rel) <= REL for o in outcomes if not o.case.knob)
