"""designer/output/plots.py: --plot's pictures drawn directly (no CliRunner): the data each
chart holds (read back from the matplotlib figure), which picture a study gets, the files
written (PNG or SVG by the suffix, nothing left behind on a bad one) and the refusals, each
naming --plot and the fix."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import matplotlib
import pytest

from designer.errors import UsageError
from designer.output import plots
from solvers import SolveResult

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

CSV = """\
gpu,budget,time_to_train_days,cost_usd,status
h100-sxm,1M,30.0,900000,optimal
h100-sxm,300K,90.0,290000,optimal
h200,1M,25.0,950000,optimal
h200,300K,,,infeasible
h200,3M,10.0,2800000,optimal
"""


@pytest.fixture
def figures(monkeypatch):
    """The figures the plots would save, instead of saving them (closed afterwards)."""
    drawn: list = []
    monkeypatch.setattr(plots, "_save", lambda plt_, fig, path: drawn.append(fig))
    yield drawn
    for fig in drawn:
        plt.close(fig)


@pytest.fixture
def results(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text(CSV)
    return path


def _row(gpu: str, days: float | None, cost: float | None):
    """A compare row: a GPU type and its result (a plan with these days and cost, or none)."""
    if days is None:
        return SimpleNamespace(gpu=gpu, result=SolveResult("infeasible", "cpsat", 0.0, None))
    ev = SimpleNamespace(time_to_train_days=days)
    plan = SimpleNamespace(evaluation=ev, cost_usd=cost)
    return SimpleNamespace(gpu=gpu, result=SolveResult("optimal", "cpsat", 0.0, 0.0, [plan]))


SCENARIO = SimpleNamespace(pricing="capex", spec=SimpleNamespace(name="llama2-7b"), tokens=2e12)
ROWS = [_row("h100-sxm", 30.0, 2.5e7), _row("l4", None, None), _row("h200", 20.0, 3.0e7)]


def test_compare_bars_are_days_and_millions_per_gpu_with_a_plan(figures):
    plots.compare_plot(ROWS, "x.png", SCENARIO)
    (fig,) = figures
    days_ax, cost_ax = fig.axes
    names = [t.get_text() for t in days_ax.get_yticklabels()]
    assert names == ["h100-sxm", "h200"]  # l4 has no plan: no bar
    assert [p.get_width() for p in days_ax.patches] == [30.0, 20.0]
    assert [p.get_width() for p in cost_ax.patches] == [25.0, 30.0]  # $M
    assert cost_ax.get_xlabel() == "cost ($M, capex)"
    assert days_ax.yaxis_inverted()  # the first GPU on top, as listed
    assert fig._suptitle.get_text() == "llama2-7b, 2T tokens: best plan per GPU type"


def test_compare_without_any_plan_draws_nothing(figures):
    """Nothing to draw is no usage error: compare still prints its answer (exit 1) and
    notes that nothing was drawn (tests/test_compare_breakeven_ties.py)."""
    assert plots.compare_plot([_row("l4", None, None)], "x.png", SCENARIO) is False
    assert figures == []
    assert plots.compare_plot(ROWS, "x.png", SCENARIO) is True


def test_the_sweep_view_is_one_colour_per_gpu_without_the_planless_rows(figures, results):
    plots.sweep_plot(results, "x.png")
    (fig,) = figures
    ax = fig.axes[0]
    got = {c.get_label(): c.get_offsets().tolist() for c in ax.collections}
    assert got == {
        "h100-sxm": [[30.0, 0.9], [90.0, 0.29]],
        "h200": [[25.0, 0.95], [10.0, 2.8]],  # the infeasible 300K row is left out
    }
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("time to train (days)", "cost ($M)")


def test_budget_curves_are_sorted_by_budget_on_log_axes(figures, results):
    plots.budget_plot(results, "x.png")
    (fig,) = figures
    ax = fig.axes[0]
    lines = {ln.get_label(): ln.get_xydata().tolist() for ln in ax.get_lines()}
    assert lines == {
        "h100-sxm": [[0.3, 90.0], [1.0, 30.0]],
        "h200": [[1.0, 25.0], [3.0, 10.0]],
    }
    assert ax.get_xscale() == ax.get_yscale() == "log"


def test_win_shares_are_percent_bars(figures):
    plots.win_share_plot({"h100-sxm": {"win_share": 0.75}, "h200": {"win_share": 0.25}}, "x")
    (fig,) = figures
    assert [p.get_height() for p in fig.axes[0].patches] == [75.0, 25.0]
    with pytest.raises(UsageError, match=r"^--plot: no scenario has a plan to draw$"):
        plots.win_share_plot({}, "x.png")


def test_a_results_csv_without_a_plan_is_refused(tmp_path):
    empty = tmp_path / "none.csv"
    empty.write_text("gpu,budget,time_to_train_days,cost_usd\nh200,1M,,\n")
    for draw in (plots.sweep_plot, plots.budget_plot):
        with pytest.raises(UsageError, match=r"^--plot: no scenario has a plan to draw$"):
            draw(empty, tmp_path / "p.png")
    assert not (tmp_path / "p.png").exists()


@pytest.mark.parametrize(
    "uncertainty,axes,picture",
    [
        ({"samples": 10}, {"budget": [1]}, "win_share_plot"),  # Monte Carlo first
        (None, {"budget": [1], "gpus": [1]}, "budget_plot"),
        (None, {"budget": [1]}, "budget_plot"),
        (None, {"budget": [1], "gpus": [1], "tokens": [1]}, "sweep_plot"),  # too many axes
        (None, {"deadline": [1]}, "sweep_plot"),
    ],
)
def test_a_study_gets_its_picture(monkeypatch, uncertainty, axes, picture):
    called = []
    for name in ("win_share_plot", "budget_plot", "sweep_plot"):
        monkeypatch.setattr(plots, name, lambda *a, name=name: called.append((name, a)))
    study = SimpleNamespace(uncertainty=uncertainty, axes=axes)
    plots.study_plot(study, "r.csv", "p.png", stats=None)
    assert [c[0] for c in called] == [picture]
    if picture == "win_share_plot":
        assert called[0][1] == ({}, "p.png")  # no stats: the empty table (then its refusal)


@pytest.mark.parametrize("suffix,magic", [(".png", b"\x89PNG\r\n"), (".svg", b"<?xml")])
def test_the_file_format_follows_the_suffix(tmp_path, results, suffix, magic):
    out = tmp_path / f"pareto{suffix}"
    plots.sweep_plot(results, out)
    assert out.read_bytes().startswith(magic)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["results.csv", out.name])
    assert plt.get_fignums() == []  # the figure is closed


def test_an_unknown_suffix_is_refused_and_leaves_nothing(tmp_path, results):
    with pytest.raises(UsageError) as info:
        plots.sweep_plot(results, tmp_path / "pareto.xyz")
    message = str(info.value)
    assert message.startswith(f"--plot: cannot write {tmp_path / 'pareto.xyz'} (")
    assert message.endswith("; use a .png or .svg path")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv"]  # no temporary file
    assert plt.get_fignums() == []


def test_without_matplotlib_the_refusal_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    with pytest.raises(UsageError) as info:
        plots.win_share_plot({"h200": {"win_share": 1.0}}, "x.png")
    assert str(info.value) == "--plot: needs matplotlib; pip install 'designer[plot]'"


MARKUP = "x$\\frac{$y"  # matplotlib's mathtext: "$...$" is parsed as math, and this fails


def test_names_with_math_markup_are_drawn_as_written(tmp_path, monkeypatch):
    """A model or GPU name with ``$`` (mathtext) was parsed as math: ``x$\\frac{$y`` made
    compare --plot an internal ValueError (suptitle unescaped, tight_layout outside the
    try); every user-derived label is escaped, and each picture is written."""
    from matplotlib.text import Text

    shown: list[str] = []
    scenario = SimpleNamespace(pricing="capex", spec=SimpleNamespace(name=MARKUP), tokens=2e12)
    rows = [_row(MARKUP, 30.0, 2.5e7), _row("h200", 20.0, 3.0e7)]
    csv_path = tmp_path / "r.csv"
    csv_path.write_text(CSV.replace("h100-sxm", f'"{MARKUP}"'))
    draws = [
        lambda out: plots.compare_plot(rows, out, scenario),
        lambda out: plots.sweep_plot(csv_path, out),
        lambda out: plots.budget_plot(csv_path, out),
        lambda out: plots.win_share_plot({MARKUP: {"win_share": 1.0}}, out),
    ]
    original = Text.draw

    def draw(self, renderer):
        shown.append(self.get_text())
        return original(self, renderer)

    monkeypatch.setattr(Text, "draw", draw)
    for i, plot in enumerate(draws):
        out = tmp_path / f"p{i}.png"
        plot(out)
        assert out.read_bytes().startswith(b"\x89PNG\r\n")
    assert MARKUP.replace("$", r"\$") in " ".join(shown)
    assert plt.get_fignums() == []
