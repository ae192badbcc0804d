"""--plot: compare's bars, a sweep's Pareto view, its budget curves and a Monte-Carlo
study's win shares (matplotlib, imported on use; PNG or SVG by the file's suffix)."""

from __future__ import annotations

from pathlib import Path

from designer.errors import UsageError
from designer.numbers import parse_quantity
from designer.output import text as render
from designer.output.files import PLOT_SUFFIXES, save_with
from designer.output.formats import plan_rows
from solvers import Scenario


def _pyplot():
    """matplotlib's pyplot on the non-interactive backend, or a usage error naming the extra."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise UsageError("needs matplotlib; pip install 'designer[plot]'", "--plot") from err
    return plt


def _label(text: object) -> str:
    """A name from the user's files (a model, a GPU type) as matplotlib text: every ``$``
    escaped, so that ``x$\\frac{$y`` is drawn as written, not parsed as math (mathtext's
    ValueError was an internal error)."""
    return str(text).replace("$", r"\$")


def _save(plt, fig, path) -> None:
    try:
        fig.tight_layout()  # lays the text out: mathtext's errors are raised here
        save_with(Path(path), fig.savefig, "--plot")
    except UsageError:
        raise
    except (OSError, ValueError) as err:
        formats = " or ".join(PLOT_SUFFIXES)
        raise UsageError(f"cannot write {path} ({err}); use a {formats} path", "--plot") from err
    finally:
        plt.close(fig)


def compare_plot(rows, path, s: Scenario) -> bool:
    """Bars of time to train and cost per GPU type (matplotlib, PNG or SVG); False, with
    nothing drawn or written, when no GPU type has a plan (the answer says why: compare
    still prints it and exits 1, noting that nothing was drawn)."""
    ok = [r for r in rows if r.result.best is not None]
    if not ok:
        return False
    plt = _pyplot()
    names = [_label(r.gpu) for r in ok]
    days = [float(r.result.best.evaluation.time_to_train_days) for r in ok]
    cost = [float(r.result.best.cost_usd) / 1e6 for r in ok]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    axes[0].barh(names, days, color="#4c72b0")
    axes[0].set_xlabel("time to train (days)")
    axes[1].barh(names, cost, color="#dd8452")
    axes[1].set_xlabel(f"cost ($M, {s.pricing})")
    for ax in axes:
        ax.invert_yaxis()
    fig.suptitle(f"{_label(s.spec.name)}, {render.si(s.tokens)} tokens: best plan per GPU type")
    _save(plt, fig, path)
    return True


class NothingToDraw(UsageError):
    """No scenario of a study has a plan: study_plot draws nothing and says so."""

    def __init__(self) -> None:
        super().__init__("no scenario has a plan to draw", "--plot")


def _per_gpu(csv_path) -> dict[str, list[dict[str, str]]]:
    """A results CSV's rows with a plan, grouped by GPU type."""
    rows = plan_rows(csv_path)
    if not rows:
        raise NothingToDraw()
    return {gpu: [r for r in rows if r["gpu"] == gpu] for gpu in sorted({r["gpu"] for r in rows})}


def sweep_plot(csv_path, path) -> None:
    """Cost against time to train, one colour per GPU type (the Pareto view of a study)."""
    plt = _pyplot()
    groups = _per_gpu(csv_path)
    fig, ax = plt.subplots(figsize=(7, 5))
    for gpu, rows in groups.items():
        days = [float(r["time_to_train_days"]) for r in rows]
        ax.scatter(days, [float(r["cost_usd"]) / 1e6 for r in rows], label=_label(gpu))
    ax.set_xlabel("time to train (days)")
    ax.set_ylabel("cost ($M)")
    ax.legend()
    _save(plt, fig, path)


def win_share_plot(stats: dict[str, dict[str, float]], path) -> None:
    """Bars of how often each GPU type wins a Monte-Carlo study."""
    plt = _pyplot()
    if not stats:
        raise NothingToDraw()
    fig, ax = plt.subplots(figsize=(6, 4))
    names = list(stats)
    shares = [100 * stats[n]["win_share"] for n in names]
    ax.bar([_label(n) for n in names], shares, color="#55a868")
    ax.set_ylabel("wins (% of samples)")
    ax.set_title("Which GPU type wins under price uncertainty")
    _save(plt, fig, path)


def budget_plot(csv_path, path) -> None:
    """Time to train against budget, one line per GPU type (studies with a budget axis)."""
    plt = _pyplot()
    groups = _per_gpu(csv_path)
    fig, ax = plt.subplots(figsize=(7, 5))
    for gpu, rows in groups.items():
        pts = sorted(
            (parse_quantity(r["budget"]) / 1e6, float(r["time_to_train_days"])) for r in rows
        )
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=_label(gpu))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("budget ($M)")
    ax.set_ylabel("time to train (days)")
    ax.legend()
    _save(plt, fig, path)


def study_plot(study, csv_path, path, stats=None) -> bool:
    """A study's picture: win shares (Monte-Carlo), time against budget (a budget axis and at
    most one other), or cost against time. False, with nothing drawn or written, when no
    scenario has a plan (the sweep still reports its rows and exits as it would without
    --plot, noting that nothing was drawn, as compare does)."""
    try:
        if study.uncertainty is not None:
            win_share_plot(stats or {}, path)
        elif "budget" in study.axes and len(study.axes) <= 2:
            budget_plot(csv_path, path)
        else:
            sweep_plot(csv_path, path)
    except NothingToDraw:
        return False
    return True
