"""Issue 20, reliability round two: a sweep's results file that knows its study, outputs that
cannot destroy inputs or half-write, a study validated before it runs, and NaN refused by
every float option. Each test names the issue's reproduction it covers."""

from __future__ import annotations

import contextlib
import csv
import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import one_line, run_main

SMALL = (
    "base:\n  model: {model}\n  tokens: 100B\n  max_batch_tokens: 1M\n  gpus: [h100-sxm]\n"
    "axes:\n  budget: [1M, 2M]\n"
)
OPTIMIZE = ["optimize", "--gpu", "h100-sxm", "--tokens", "20B", "--budget", "1M"]
OPTIMIZE += ["--max-batch-tokens", "1M", "--no-explain"]
SPEC = '{"layers": 2, "hidden": 256, "heads": 8, "vocab": 1000, "seq_len": 512}'


def study(tmp_path: Path, name: str = "small.yaml", model: str = "llama2-7b") -> Path:
    path = tmp_path / name
    path.write_text(SMALL.format(model=model))
    return path


def sweep(capsys, study_file: Path, out: Path, *more: str) -> tuple[int, str, str]:
    return run_main(capsys, ["sweep", str(study_file), "--csv", str(out), "--workers", "1", *more])


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def refused(capsys, args: list[str], *words: str) -> str:
    """The command exits 2 with one line naming every word."""
    code, _, err = run_main(capsys, args)
    line = one_line(err)
    assert code == 2, err
    for w in words:
        assert w in line, line
    assert "internal error" not in line
    return line


# ---------------------------------------------------------------- 1: resume knows its study
def test_resume_refuses_another_studys_results(tmp_path, capsys):
    """Reproduction 1: the same axes with another model (base) are another study."""
    mine, theirs = study(tmp_path), study(tmp_path, "other.yaml", "llama2-13b")
    out = tmp_path / "r.csv"
    assert sweep(capsys, theirs, out)[0] == 0
    before = out.read_bytes()
    refused(capsys, ["sweep", str(mine), "--csv", str(out), "--resume"], str(out), "another study")
    assert out.read_bytes() == before
    # every row carries the study's hash; all the same, and pandas still reads the file
    hashes = {r["study"] for r in rows(out)}
    assert len(hashes) == 1 and len(next(iter(hashes))) == 16
    pd = pytest.importorskip("pandas")
    assert len(pd.read_csv(out)) == 2


def test_resume_refuses_a_results_file_without_a_study_hash(tmp_path, capsys):
    """Reproduction 1: a CSV of an older designer (no study column) cannot be vouched for."""
    s, out = study(tmp_path), tmp_path / "old.csv"
    assert sweep(capsys, s, out)[0] == 0
    lines = out.read_text().splitlines()
    out.write_text("\n".join(line.rsplit(",", 1)[0] for line in lines) + "\n")
    before = out.read_bytes()
    refused(capsys, ["sweep", str(s), "--csv", str(out), "--resume"], "study column")
    assert out.read_bytes() == before
    # without --resume a results file (of any study) is replaced by the new sweep
    code, out_text, _ = sweep(capsys, s, out)
    assert code == 0 and "2 scenarios run" in out_text and len(rows(out)) == 2


# ---------------------------------------------------------------- 2: an empty file
def test_an_empty_file_is_a_new_results_file(tmp_path, capsys):
    """Reproduction 2: the header is written; a second resume runs nothing and adds nothing."""
    s, out = study(tmp_path), tmp_path / "e.csv"
    out.write_text("")
    code, text, _ = sweep(capsys, s, out, "--resume")
    assert code == 0 and "2 scenarios run" in text
    assert len(rows(out)) == 2 and out.read_text().startswith("scenario,")
    code, text, _ = sweep(capsys, s, out, "--resume")
    assert code == 0 and "0 scenarios run" in text and len(rows(out)) == 2


# ---------------------------------------------------------------- 3: the lock
def test_a_locked_results_file_is_refused(tmp_path, capsys):
    """Reproduction 3: while another sweep holds the file, a second exits 2 at once."""
    s, out = study(tmp_path), tmp_path / "c.csv"
    with out.open("a") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        refused(capsys, ["sweep", str(s), "--csv", str(out), "--resume"], "another sweep", str(out))
    assert out.read_text() == ""
    assert sweep(capsys, s, out, "--resume")[0] == 0 and len(rows(out)) == 2


def test_two_concurrent_resumes_write_each_scenario_once(tmp_path):
    """Reproduction 3 with two real processes: one runs, the other exits 2."""
    s, out = tmp_path / "med.yaml", tmp_path / "c.csv"
    budgets = ", ".join(f"{b}M" for b in range(1, 41))
    s.write_text(SMALL.format(model="llama2-7b").replace("[1M, 2M]", f"[{budgets}]"))
    cmd = [sys.executable, "-m", "designer", "sweep", str(s), "--csv", str(out), "--resume"]
    cmd += ["--workers", "1"]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]  # started together: the one that locks first runs for seconds, the other is refused
    done = [(p.wait(timeout=300), p.communicate()[1]) for p in procs]
    assert sorted(code for code, _ in done) == [0, 2], done
    assert any("another sweep" in err for _, err in done)
    ids = [r["scenario"] for r in rows(out)]
    assert len(ids) == len(set(ids)) == 40


def test_orphaned_workers_do_not_keep_the_lock(tmp_path, capsys):
    """Reproduction 3: the sweep's process killed under its workers; a resume at once gets
    the lock (forked workers close their copy of the locked file) and finishes the study."""
    s, out = tmp_path / "med.yaml", tmp_path / "c.csv"
    budgets = ", ".join(f"{b}M" for b in range(1, 31))
    s.write_text(SMALL.format(model="llama2-7b").replace("[1M, 2M]", f"[{budgets}]"))
    proc = _sweep_process(s, out, 2)
    try:
        deadline = time.time() + 120
        while len(out.read_text().splitlines() if out.exists() else []) < 3:
            assert time.time() < deadline and proc.poll() is None
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)  # the parent only: its workers live on
        proc.wait()
        code, text, err = sweep(capsys, s, out, "--resume")
        assert code == 0, err
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    ids = [r["scenario"] for r in rows(out)]
    assert len(ids) == len(set(ids)) == 30


# ---------------------------------------------------------------- 4: outputs never inputs
def test_an_output_that_is_an_input_is_refused(tmp_path, capsys):
    """Reproduction 4: the study file, a model file, a catalog file, another output."""
    s = study(tmp_path)
    model = tmp_path / "m.json"
    model.write_text(SPEC)
    catalog = tmp_path / "cat.yaml"
    catalog.write_text("gpus: {}\n")
    kept = {p: p.read_bytes() for p in (s, model, catalog)}
    refused(capsys, ["sweep", str(s), "--csv", str(s)], "--csv", "STUDY_FILE")
    refused(capsys, [*OPTIMIZE, "--model", str(model), "--csv", str(model)], "--csv", "--model")
    refused(capsys, [*OPTIMIZE, "--catalog", str(catalog), "--bom", str(catalog)], "--catalog")
    x = tmp_path / "x"
    refused(capsys, [*OPTIMIZE, "--csv", str(x), "--bom", str(x)], "--bom", "--csv")
    assert not x.exists()
    refused(capsys, ["sweep", str(s), "--csv", str(x), "--plot", str(x)], "--plot", "--csv")
    assert {p: p.read_bytes() for p in kept} == kept


def test_a_sweep_output_that_is_a_file_the_study_reads_is_refused(tmp_path, capsys):
    """Reproduction 4: a model spec the study names is an input too."""
    (tmp_path / "m.json").write_text(SPEC)
    s = tmp_path / "s.yaml"
    s.write_text("base:\n  model: m.json\n  tokens: 1B\naxes:\n  budget: [1M]\n")
    refused(capsys, ["sweep", str(s), "--csv", str(tmp_path / "m.json")], "--csv", "study")
    assert (tmp_path / "m.json").read_text() == SPEC


def test_whole_file_outputs_are_renamed_into_place(tmp_path, capsys, monkeypatch):
    """Outputs go to a temporary file first: a failed write keeps the old file, leaves no
    temporary behind, and exits 2 naming the path."""
    from designer import outputs

    out = tmp_path / "plans.csv"
    out.write_text("old\n")
    out.chmod(0o640)
    code, _, err = run_main(capsys, [*OPTIMIZE, "--model", "llama2-7b", "--csv", str(out)])
    assert code == 0, err
    assert out.read_text().startswith("rank,") and (out.stat().st_mode & 0o777) == 0o640

    def full(fh, text):
        fh.write(text[:10])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outputs, "_write", full)
    out.write_text("old\n")
    refused(capsys, [*OPTIMIZE, "--model", "llama2-7b", "--csv", str(out)], str(out), "space")
    assert out.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plans.csv"]


# ---------------------------------------------------------------- 5: never truncate
@pytest.mark.parametrize("content", [b"notes", b"\x89PNG\r\n\x1a\n\x00\xff\xfe binary"])
def test_resume_never_touches_a_file_it_does_not_recognise(tmp_path, capsys, content):
    """Reproduction 5: a text file or a binary file is refused, byte for byte unchanged."""
    s, out = study(tmp_path), tmp_path / "n.txt"
    out.write_bytes(content)
    refused(capsys, ["sweep", str(s), "--csv", str(out), "--resume"], str(out), "--csv")
    assert out.read_bytes() == content
    # nor without --resume: only a results file is replaced
    refused(capsys, ["sweep", str(s), "--csv", str(out)], str(out))
    assert out.read_bytes() == content


# ---------------------------------------------------------------- 6: the whole study first
BAD_STUDIES = {
    "base:\n  model: nosuchmodel\n  budget: 1M\naxes:\n  tokens: [1B]\n": ("base.model", "nosuch"),
    "base:\n  budget: 30MM\naxes:\n  tokens: [1B]\n": ("base.budget", "30MM"),
    "base:\n  budget: .nan\naxes:\n  tokens: [1B]\n": ("base.budget", "nan"),
    "base:\n  tokens: 1B\naxes:\n  budget: [1M, -1M]\n": ("axes.budget", "-1M"),
    "axes:\n  deadline: [10d, 0d]\n": ("axes.deadline", "0d"),
    "base:\n  budget: 1M\naxes:\n  gpus: [[h100-sxm], [h900]]\n": ("axes.gpus", "h900"),
    "base:\n  budget: 1M\naxes:\n  model: [{layers: 0, hidden: 256, heads: 8, vocab: 100}]\n": (
        "axes.model.layers",
        "greater than",
    ),
    "base:\n  budget: 1M\naxes:\n  price_scale: [{h900: 2.0}]\n": ("axes.price_scale", "h900"),
    "base:\n  budget: 1M\naxes:\n  tokens: [1B]\nuncertainty:\n  samples: 2\n"
    "  price_scale: {h900: [0.5, 2.0]}\n": ("uncertainty.price_scale", "h900"),
    "base:\n  budget: 1M\n  power_cap: .inf\naxes:\n  tokens: [1B]\n": ("base.power_cap", "inf"),
}


@pytest.mark.parametrize("text", list(BAD_STUDIES), ids=range(len(BAD_STUDIES)))
def test_a_bad_study_is_refused_before_anything_runs(tmp_path, capsys, text):
    """Reproduction 6: exit 2 naming the field and the value; no results file at all."""
    s = tmp_path / "bad.yaml"
    s.write_text(text)
    out = tmp_path / "bad.csv"
    refused(capsys, ["sweep", str(s), "--csv", str(out)], str(s), *BAD_STUDIES[text])
    assert not out.exists()


# ---------------------------------------------------------------- 7 and 15: output paths
def test_the_default_csv_in_a_read_only_study_folder_is_refused(tmp_path, capsys, monkeypatch):
    """Reproduction 7: checked before any scenario runs, naming the path and --csv."""
    from designer import outputs

    folder = tmp_path / "shared"
    folder.mkdir()
    s = study(folder)
    real = os.access
    monkeypatch.setattr(
        outputs.os, "access", lambda p, mode: False if Path(p) == folder else real(p, mode)
    )  # a read-only folder (a chmod does not stop root, who runs some CI)
    refused(capsys, ["sweep", str(s)], "--csv", str(folder / "small.csv"), "read-only")
    assert not (folder / "small.csv").exists()


def test_os_errors_on_outputs_exit_2_naming_the_path(tmp_path, capsys):
    """Reproduction 15: a missing folder before any work; /dev/full when written."""
    s = study(tmp_path)
    missing = tmp_path / "no" / "such" / "out.csv"
    start = time.perf_counter()
    refused(capsys, ["sweep", str(s), "--csv", str(missing)], str(missing), "does not exist")
    refused(capsys, ["sweep", str(s), "--plot", str(missing)], "--plot", "does not exist")
    assert time.perf_counter() - start < 5  # refused before the scenarios run
    refused(capsys, ["sweep", str(s), "--plot", str(tmp_path / "p")], "--plot", ".png")
    refused(capsys, [*OPTIMIZE, "--model", "llama2-7b", "--bom", str(missing)], "--bom")
    refused(capsys, [*OPTIMIZE, "--model", "llama2-7b", "--csv", str(tmp_path)], "directory")
    if Path("/dev/full").exists():
        refused(capsys, [*OPTIMIZE, "--model", "llama2-7b", "--csv", "/dev/full"], "/dev/full")


# ---------------------------------------------------------------- 12: NaN and infinities
@pytest.mark.parametrize(
    "option",
    ["--power-cap", "--memory-overhead", "--dp-overlap", "--reserved-gb", "--time-limit"],
)
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_float_options_refuse_nan_and_infinities(capsys, option, value):
    """Reproduction 12: exit 2 naming the option, before any solve."""
    refused(capsys, [*OPTIMIZE, "--model", "llama2-7b", option, value], option)


@pytest.mark.parametrize("option", ["--memory-overhead", "--dp-overlap", "--reserved-gb"])
def test_evaluate_float_options_refuse_nan(capsys, option):
    refused(capsys, ["evaluate", "--model", "llama2-7b", option, "nan"], option)


# ---------------------------------------------------------------- acceptance: interruptions
ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(["SIGKILL", "SIGTERM", "SIGINT", "concurrent", "parent-kill"]),
        st.floats(min_value=0.0, max_value=3.0),
    ),
    min_size=1,
    max_size=3,
)


def _sweep_process(study_file: Path, out: Path, workers: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "designer", "sweep", str(study_file), "--csv", str(out)]
    cmd += ["--resume", "--workers", str(workers)]
    return subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def _interrupt(study_file: Path, out: Path, action: str, delay: float) -> None:
    """One interrupted run: a signal after ``delay`` seconds, or two resumes at once; every
    process of it ended (orphaned workers too) before the next."""
    workers = 2 if action == "parent-kill" else 1
    procs = [
        _sweep_process(study_file, out, workers) for _ in range(2 if action == "concurrent" else 1)
    ]
    time.sleep(delay)
    if action in ("SIGKILL", "SIGTERM", "SIGINT"):
        os.killpg(procs[0].pid, getattr(signal, action))
    elif action == "parent-kill":
        os.kill(procs[0].pid, signal.SIGKILL)  # the workers live on, without the lock
    for p in procs:
        try:
            _, err = p.communicate(timeout=300)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
        assert "internal error" not in (err or ""), err


@pytest.mark.slow
@settings(max_examples=6, deadline=None, derandomize=True, database=None)
@given(
    budgets=st.lists(
        st.sampled_from(["1M", "1.5M", "2M", "3M", "4M"]), min_size=1, max_size=4, unique=True
    ),
    model=st.sampled_from(["llama2-7b", "llama2-13b"]),
    actions=ACTIONS,
)
def test_interrupted_and_concurrent_sweeps_leave_one_row_per_scenario(budgets, model, actions):
    """Acceptance of issue 20: random studies, random signals at random times and two resumes
    at once; a final --resume leaves exactly one row per scenario, all of this study."""
    from designer import sweep as sweep_module

    with tempfile.TemporaryDirectory() as folder:
        s = Path(folder) / "s.yaml"
        s.write_text(
            f"base:\n  model: {model}\n  tokens: 100B\n  max_batch_tokens: 1M\n"
            f"axes:\n  budget: [{', '.join(budgets)}]\n  gpus: [[h100-sxm], [h200]]\n"
        )
        out = Path(folder) / "s.csv"
        for action, delay in actions:
            _interrupt(s, out, action, delay)
        final = _sweep_process(s, out, 1)
        _, err = final.communicate(timeout=300)
        assert final.returncode == 0, err
        study = sweep_module.load_study(s)
        want = {sweep_module.scenario_id(v) for v in sweep_module.scenarios(study)}
        got = rows(out)
        assert sorted(r["scenario"] for r in got) == sorted(want)
        assert {r["study"] for r in got} == {sweep_module.digest(study, str(s))}


def test_an_interrupt_inside_an_import_is_an_abort_not_an_internal_error(capsys, monkeypatch):
    """Ctrl-C while OR-Tools initialises reaches the command as ImportError("initialization
    failed") raised from the KeyboardInterrupt (pybind11); the CLI reports the abort."""
    import designer.cli as cli_module

    def interrupted_import():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as err:
            raise ImportError("initialization failed") from err

    monkeypatch.setattr(cli_module, "zoo", interrupted_import)
    code, _, err = run_main(capsys, ["models"])
    assert code == 1
    assert one_line(err) == "designer: aborted"


def _dying_worker(*args):
    os._exit(3)  # a sweep worker killed mid-scenario (a signal, the OOM killer)


def test_a_dead_sweep_worker_stops_the_sweep_in_one_line(tmp_path, capsys, monkeypatch):
    from designer import sweep as sweep_module

    monkeypatch.setattr(sweep_module, "run_one", _dying_worker)
    out = tmp_path / "out.csv"
    code, _, err = run_main(
        capsys, ["sweep", str(study(tmp_path)), "--csv", str(out), "--workers", "2"]
    )
    assert code == 1
    line = one_line(err)
    assert line.startswith("designer: stopped: a sweep worker died") and "--resume" in line


def test_a_script_whose_variables_double_is_refused_not_expanded(tmp_path, capsys):
    """Reproduction 8: twenty self-doubling shell variables in a 420-byte script would
    expand to gigabytes; the importer stops past 100K characters with exit 2."""
    lines = ['A="--num-layers 2 "', 'A1="$A $A"']
    lines += [f'A{i}="$A{i - 1} $A{i - 1}"' for i in range(2, 21)]
    lines.append("torchrun pretrain_gpt.py $A20")
    script = tmp_path / "run.sh"
    script.write_text("\n".join(lines) + "\n")
    code, _, err = run_main(capsys, ["evaluate", "--from-megatron", str(script)])
    assert code == 2
    line = one_line(err)
    assert "--from-megatron" in line and "expand past 100,000 characters" in line


def test_workers_are_capped_at_the_cores_unless_forced(tmp_path, capsys, monkeypatch):
    """Reproduction 9: --workers 500 for a small study started 501 processes; now the cores
    cap it (with a note) unless --force, and no more workers start than scenarios to run."""
    from designer import sweep as sweep_module

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert sweep_module.local_workers(None) == (2, None)
    assert sweep_module.local_workers(2) == (2, None)
    workers, note = sweep_module.local_workers(500)
    assert workers == 2 and note is not None and "--force" in note
    assert sweep_module.local_workers(500, force=True) == (500, None)
    started = []
    real_pool = sweep_module._pool
    monkeypatch.setattr(sweep_module, "_pool", lambda n, fd: started.append(n) or real_pool(n, fd))
    out = tmp_path / "out.csv"
    args = ["sweep", str(study(tmp_path)), "--csv", str(out), "--workers", "500", "--force"]
    code, _, err = run_main(capsys, args)
    assert code == 0, err
    assert started == [2]  # two scenarios: two workers, not 500
    code, _, err = run_main(
        capsys, ["sweep", str(study(tmp_path)), "--csv", str(out)] + ["--workers", "9"]
    )
    assert code == 0 and "capped at this machine's 2 cores" in err


def test_a_study_over_the_size_limit_asks_for_yes(tmp_path, capsys):
    """Reproduction 10: a 1000 x 1000 study started at once; over --max-scenarios (default
    100,000) it exits 2 before anything runs, unless --yes."""
    big = tmp_path / "big.yaml"
    budgets = ", ".join(f"{b}M" for b in range(1, 1001))
    tokens = ", ".join(f"{t}B" for t in range(1, 1001))
    big.write_text(
        f"base:\n  model: llama2-7b\n  gpus: [h100-sxm]\naxes:\n  budget: [{budgets}]\n"
        f"  tokens: [{tokens}]\n"
    )
    out = tmp_path / "big.csv"
    code, _, err = run_main(capsys, ["sweep", str(big), "--csv", str(out)])
    assert code == 2 and "1,000,000 scenarios, more than 100,000" in one_line(err)
    assert not out.exists()
    small = study(tmp_path)
    args = ["sweep", str(small), "--csv", str(out), "--max-scenarios", "1"]
    code, _, err = run_main(capsys, args)
    assert code == 2 and "--yes" in one_line(err)
    code, _, err = run_main(capsys, [*args, "--yes"])
    assert code == 0, err
    assert len(rows(out)) == 2


def test_breakeven_with_no_plan_on_either_side_exits_1(capsys):
    """Reproduction 16: neither GPU has a plan at any price searched; the contract's exit 1."""
    args = ["breakeven", "--model", "llama3-405b", "--budget", "10K", "--gpu", "h200"]
    code, _, err = run_main(capsys, [*args, "--against", "h100-sxm"])
    assert code == 1
    assert one_line(err).startswith("designer: infeasible: neither h200")


def test_json_output_is_standard_json_and_tiny_peaks_are_refused(tmp_path, capsys):
    """Reproductions 14 and 19: a catalog override of 1e-300 TFLOPS (or a $1e-300 GPU) is
    refused naming the field; and a quantity that is not finite prints as null in --json,
    never the invalid Infinity."""
    import json

    from designer.cli import emit_json

    tiny = tmp_path / "tiny.yaml"
    for field in ("dense_bf16_tflops", "price_usd"):
        tiny.write_text(f"gpus:\n  h100-sxm:\n    {field}: 1e-300\n")
        code, _, err = run_main(capsys, ["evaluate", "--catalog", str(tiny)])
        assert code == 2 and f"gpus.h100-sxm.{field}" in one_line(err)
    capsys.readouterr()
    emit_json({"days": float("inf"), "rows": [float("nan"), 1.5], "n": 2})
    assert json.loads(capsys.readouterr().out) == {"days": None, "rows": [None, 1.5], "n": 2}


def test_the_exhaustive_solver_keeps_its_time_limit(capsys):
    """Reproduction 18: --solver exhaustive --time-limit 0.01 ran 15 s and said optimal; it
    now stops between shapes and says what it has (unknown here: exit 1, no plan)."""
    from solvers import space

    # a space (and its coefficients) kept from an earlier test would let the search reach
    # a plan within 0.01 s: enumerate afresh, so the limit passes before the first shape
    space._SPACES.clear()
    args = ["optimize", "--budget", "30M", "--solver", "exhaustive", "--time-limit", "0.01"]
    code, out, err = run_main(capsys, [*args, "--no-explain"])
    assert code == 1
    assert "exhaustive: unknown" in out and "optimal" not in out
    assert "time limit" in one_line(err)
