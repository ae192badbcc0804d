"""Issue 20, reliability round two: a sweep's results file that knows its study, outputs that
cannot destroy inputs or half-write, a study validated before it runs, and NaN refused by
every float option. Each test names the issue's reproduction it covers."""

from __future__ import annotations

import contextlib
import csv
import fcntl
import json
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
    # nor without --resume (issue 33: a user's CSV headed scenario,...,status is not the
    # sweep's to replace); a results file of another study is replaced
    refused(capsys, ["sweep", str(s), "--csv", str(out)], "not written by designer sweep")
    assert out.read_bytes() == before
    out.unlink()
    assert sweep(capsys, s, out)[0] == 0
    code, out_text, _ = sweep(capsys, study(tmp_path, "other.yaml", "llama2-13b"), out)
    assert code == 0 and "scenarios run" in out_text


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
    s, out, proc = _started_sweep(tmp_path)
    try:
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


def _started_sweep(tmp_path: Path) -> tuple[Path, Path, subprocess.Popen]:
    """A 30-scenario study swept on two workers (its own session), once 2 rows are written."""
    s, out = tmp_path / "med.yaml", tmp_path / "c.csv"
    budgets = ", ".join(f"{b}M" for b in range(1, 31))
    s.write_text(SMALL.format(model="llama2-7b").replace("[1M, 2M]", f"[{budgets}]"))
    proc = _sweep_process(s, out, 2)
    deadline = time.time() + 120
    while len(out.read_text().splitlines() if out.exists() else []) < 3:
        if time.time() > deadline or proc.poll() is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"the sweep wrote no rows: {proc.communicate()[1]}")
        time.sleep(0.02)
    return s, out, proc


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
    assert code == 130
    assert one_line(err) == "designer: interrupted (SIGINT)"


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

    # a space kept from an earlier test would enumerate within the limit and let the first
    # shape finish (feasible): start cold, as the command does
    space._SPACES.clear()
    args = ["optimize", "--budget", "30M", "--solver", "exhaustive", "--time-limit", "0.01"]
    start = time.perf_counter()
    code, out, err = run_main(capsys, [*args, "--no-explain"])
    assert time.perf_counter() - start < 10
    assert "exhaustive: optimal" not in out and "status: optimal" not in out
    if code == 1:  # stopped before a shape finished (the usual case)
        assert "exhaustive: unknown" in out
        assert "time limit" in one_line(err)
    else:  # a warm process may finish its first shape within 0.01 s: a plan, not proved
        assert code == 0 and "exhaustive: feasible" in out, (code, out, err)


# ---------------------------------------------------------------- 11: signals
def _workers_of(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in children.read_text().split()] if children.exists() else []


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped is not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "(zombie)" not in status


def _signalled_sweep(tmp_path: Path, sig: signal.Signals, group: bool) -> tuple[int, str, Path]:
    """A 30-scenario sweep on two workers, signalled once it has written 2 rows."""
    s, _, proc = _started_sweep(tmp_path)
    try:
        workers = _workers_of(proc.pid)
        assert workers, "no worker processes"
        (os.killpg if group else os.kill)(proc.pid, sig)
        _, err = proc.communicate(timeout=60)
        assert not [w for w in workers if _running(w)], "a worker outlived the sweep"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, err, s


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc (Linux)")
@pytest.mark.parametrize(
    "sig,group,code",
    [(signal.SIGTERM, False, 143), (signal.SIGINT, True, 130)],
    ids=["SIGTERM-to-the-sweep", "SIGINT-to-its-group"],
)
def test_a_signalled_sweep_stops_its_workers_and_can_resume(tmp_path, capsys, sig, group, code):
    """Reproduction 11: SIGTERM to the sweep (kill PID) left its workers running, adopted by
    PID 1. Now SIGTERM or Ctrl-C (SIGINT to the whole process group, as a terminal sends
    it) stops the workers, keeps the rows written, and exits 143 or 130 with one line."""
    returned, err, s = _signalled_sweep(tmp_path, sig, group)
    assert returned == code, err
    line = one_line(err)
    want = "terminated (SIGTERM)" if code == 143 else "interrupted (SIGINT)"
    assert line.startswith(f"designer: {want}: "), line
    assert "scenarios run and kept in" in line and "--resume" in line
    out = tmp_path / "c.csv"
    kept = len(rows(out))
    assert 2 <= kept < 30
    code2, text, err2 = sweep(capsys, s, out, "--resume")
    assert code2 == 0, err2
    assert f"{30 - kept} scenarios run" in text
    ids = [r["scenario"] for r in rows(out)]
    assert len(ids) == len(set(ids)) == 30


def _hard_model():
    """A 0-1 knapsack with 40 constraints over 300 items: CP-SAT needs far longer than the
    test waits to prove it (seeded)."""
    import random

    from ortools.sat.python import cp_model

    rng = random.Random(1)
    md = cp_model.CpModel()
    xs = [md.new_bool_var(f"x{i}") for i in range(300)]
    for _ in range(40):
        md.add(sum(rng.randint(1, 100) * x for x in xs) <= 5000)
    md.maximize(sum(rng.randint(1, 100) * x for x in xs))
    return md


def test_sigint_stops_a_running_cp_sat_search():
    """Reproduction 11: CP-SAT caught Ctrl-C itself and went on as if its time limit had
    passed. Under the CLI's watch (solvers/stop.py) a SIGINT stops the search at once, later
    searches do not start, and KeyboardInterrupt reaches the caller."""
    import threading

    from designer import interrupts
    from solvers import stop

    solver = stop.stoppable_solver()
    solver.parameters.max_time_in_seconds = 60
    solver.parameters.num_workers = 1
    assert solver.parameters.catch_sigint_signal is False
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    start = time.perf_counter()
    with stop.watch([signal.SIGINT]):
        with pytest.raises(KeyboardInterrupt):
            timer.start()
            solver.solve(_hard_model())
        assert stop.stopped()
        with pytest.raises(KeyboardInterrupt):
            stop.stoppable_solver().solve(_hard_model())  # no new search starts
        line, code = interrupts.describe(KeyboardInterrupt())
        assert code == 130 and "the CP-SAT search was stopped" in line
        assert "no plan is reported" in line and "--time-limit" in line
    assert time.perf_counter() - start < 20
    assert not stop.stopped()  # reset when the watch ends


OPTIMIZE_SLOW = ["optimize", "--deadline", "60d", "--pricing", "tco", "--model", "llama3-405b"]
OPTIMIZE_SLOW += ["--evidence", "any", "--precision", "any", "--top", "20", "--no-explain"]


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (Linux /proc/PID/stat, fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_optimize_stops_it_with_one_line(sig, code):
    """Reproduction 11: SIGINT during optimize ran to the end and printed `feasible` with exit
    0. Now the command stops (the search too, when one runs) and prints no plan: exit 130
    (143 for SIGTERM) with one line. The question takes about 8 s of CPU to answer; the
    signal goes once the command has used 3 s (a fixed sleep missed it on an idle machine)."""
    cmd = [sys.executable, "-m", "designer", *OPTIMIZE_SLOW, "--time-limit", "60"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while proc.poll() is None and _cpu_seconds(proc.pid) < 3.0:
        time.sleep(0.05)
    assert proc.poll() is None, "the question answered before the signal could be sent"
    sent = time.perf_counter()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    line = one_line(err)
    assert line.startswith(
        "designer: interrupted (SIGINT)" if code == 130 else "designer: terminated"
    )
    assert out == ""  # no plan, no status claimed
    assert time.perf_counter() - sent < 5


@pytest.mark.slow
def test_a_wide_top_k_question_builds_a_valid_model():
    """``--top 20`` on this question ended in "internal error: invalid CP-SAT model (The sum of
    all variable domains do not fit on an int64_t)": the top-K cutoff was a variable of domain
    [0, 2^61]. It is now a linear constraint's bound: twenty plans, proved."""
    cmd = [sys.executable, "-m", "designer", *OPTIMIZE_SLOW, "--time-limit", "120", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["status"] == "optimal"
    assert len(answer["plans"]) == 20


# ---------------------------------------------------------------- 13: the integer range
RANGE_CASES = [
    (["optimize", "--budget", "1e17"], "--budget", "1e13"),
    (["optimize", "--max-gpus", "1e19"], "--max-gpus", "1,048,576"),
    (["optimize", "--deadline", "1e9d"], "--deadline", "1,000,000"),
    (["optimize", "--gpu-cap", "h100-sxm=1e30"], "--gpu-cap", "1,048,576"),
    (["optimize", "--max-racks", "1e30"], "--max-racks", "1,048,576"),
    (["optimize", "--max-batch-tokens", "1e30"], "--max-batch-tokens", "1e12"),
    (["optimize", "--min-batch-tokens", "1e30"], "--min-batch-tokens", "1e12"),
    (["optimize", "--tokens", "1e30"], "--tokens", "1e18"),
    (["optimize", "--power-cap", "1e300"], "--power-cap", "1000000000"),
    (["evaluate", "--dp", "1e20"], "--dp", "1e20"),
    (["evaluate", "--dp", "100000000000000000000"], "--dp", "1048576"),
    (["evaluate", "--nics-per-node", "100000000000000000000"], "--nics-per-node", "1048576"),
    (["compare", "--budget", "1e308"], "--budget", "1e13"),
]


@pytest.mark.parametrize("args,option,largest", RANGE_CASES, ids=[c[1] for c in RANGE_CASES])
def test_values_past_the_integer_range_are_refused_naming_the_largest(
    capsys, args, option, largest
):
    """Reproduction 13: these overflowed CP-SAT's 64-bit integers (internal error); each
    now exits 2 naming the option and the largest value allowed (solvers/limits.py), before
    any work. --power-cap 1e300 no longer advises lowering the GPU cap."""
    line = refused(capsys, args, option, largest)
    assert "GPU cap or batch ceiling" not in line


def test_a_question_file_past_the_range_names_its_field(tmp_path, capsys):
    q = tmp_path / "q.yaml"
    q.write_text("model: llama2-7b\nbudget: 1e17\n")
    refused(capsys, ["explain", str(q)], "budget", "1e13")
    s = tmp_path / "s.yaml"
    s.write_text("base:\n  model: llama2-7b\naxes:\n  max_gpus: [8, 1e19]\n")
    refused(capsys, ["sweep", str(s), "--csv", str(tmp_path / "s.csv")], "axes.max_gpus")


AT_THE_LIMITS = [
    ["--budget", "1e13", "--pricing", "tco"],
    ["--budget", "1e13", "--pricing", "cloud"],
    ["--budget", "1M", "--max-batch-tokens", "1e12", "--seq-len", "1"],
    ["--budget", "1M", "--power-cap", "1e9", "--max-racks", "1048576"],
    ["--deadline", "1e6", "--tokens", "1"],
    ["--deadline", "1e6", "--pricing", "cloud", "--tokens", "1e18"],
    ["--budget", "1M", "--max-gpus", "1048576", "--gpu-cap", "h100-sxm=1048576"],
]


@pytest.mark.parametrize("limits", AT_THE_LIMITS, ids=range(len(AT_THE_LIMITS)))
def test_the_largest_values_allowed_are_solved(capsys, limits):
    """The bounds are the model's: at them, the model builds and solves (exit 0)."""
    args = ["optimize", "--model", "llama2-7b", "--gpu", "h100-sxm", "--no-explain"]
    code, out, err = run_main(capsys, [*args, *limits])
    assert code == 0, err
    assert "optimal" in out


# ---------------------------------------------------------------- 14: large catalog values
@pytest.mark.parametrize(
    "entry",
    [
        "gpus:\n  h100-sxm:\n    server:\n      overhead_usd: 1e300\n",
        "gpus:\n  h100-sxm:\n    server:\n      host_power_w: 1e300\n",
        "nics:\n  cx7-400g:\n    price_usd: 1e300\n",
        "switches:\n  qm9700:\n    price_usd: 1e300\n",
        "nics:\n  cx7-400g:\n    transceiver_usd: 1e300\n",
        "gpus:\n  h100-sxm:\n    calibration:\n      collective_latency_us: 1e300\n",
    ],
    ids=["overhead", "host-power", "nic-price", "switch-price", "transceiver", "latency"],
)
def test_huge_catalog_values_are_refused_naming_file_and_field(tmp_path, capsys, entry):
    """Reproduction 14: 1e300 in a catalog override crashed the solvers (OverflowError);
    catalog fields have physical upper bounds, exit 2 naming the file and the field."""
    cat = tmp_path / "big.yaml"
    cat.write_text(entry)
    field = entry.split(":")[-2].strip()
    refused(capsys, [*OPTIMIZE, "--model", "llama2-7b", "--catalog", str(cat)], "big.yaml", field)


# ---------------------------------------------------------------- 17, 20, 21
MEGATRON = "torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py --num-layers 32 "
MEGATRON += "--hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
MEGATRON += "--max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 8 --bf16"


@pytest.mark.parametrize(
    "change,flag",
    [
        (("--num-layers 32", "--num-layers 200000"), "--num-layers"),
        (("--bf16", "--bf16 --vocab-size 999999999"), "--vocab-size"),
        (("--hidden-size 4096", "--hidden-size 40000000"), "--hidden-size"),
        (("--bf16", "--bf16 --ffn-hidden-size 1000000000"), "--ffn-hidden-size"),
    ],
)
def test_megatron_import_blames_the_flag_out_of_range(capsys, change, flag):
    """Reproduction 17: --num-layers 200000 or --vocab-size 999999999 blamed
    --num-attention-heads."""
    line = refused(capsys, ["evaluate", "--from-megatron", MEGATRON.replace(*change)], flag)
    assert "--num-attention-heads" not in line


def test_compare_plot_without_a_suffix_is_refused_before_work(tmp_path, capsys):
    """Reproduction 20: compare --plot /dev/full wrote /dev/full.png, --plot p wrote p.png."""
    args = [*OPTIMIZE[:-1], "--model", "llama2-7b"]
    args[0] = "compare"
    for path in ("/dev/full", str(tmp_path / "p")):
        refused(capsys, [*args, "--plot", path], "--plot", ".png")
    assert list(tmp_path.iterdir()) == []


def test_a_rack_smaller_than_one_server_is_refused(tmp_path, capsys):
    """Reproduction 21: --rack-power-kw 0.001 put 10 kW servers one to a 1 W rack with no
    violation. A GPU whose server exceeds its rack is refused (named with --gpu) or left out
    of the search; none left is exit 2 naming --rack-power-kw and the least that fits."""
    line = refused(capsys, [*OPTIMIZE, "--model", "llama2-7b", "--rack-power-kw", "0.001"])
    assert "--rack-power-kw" in line and "h100-sxm server draws 10.0 kW" in line
    args = ["optimize", "--model", "llama2-7b", "--tokens", "20B", "--budget", "1M"]
    args += ["--max-batch-tokens", "1M", "--no-explain", "--evidence", "any"]
    code, out, err = run_main(capsys, [*args, "--rack-power-kw", "5"])
    assert code == 0, err
    plan = next(line for line in out.splitlines() if line.startswith("Best plan"))
    assert any(g in plan for g in ("h100-pcie", "l40s", "rtx4090"))  # servers under 5 kW
    s = tmp_path / "s.yaml"
    s.write_text("base:\n  model: llama2-7b\n  budget: 1M\naxes:\n  rack_power_kw: [42, 0.001]\n")
    refused(capsys, ["sweep", str(s), "--csv", str(tmp_path / "s.csv")], "axes.rack_power_kw")


# ---------------------------------------------------------------- 22
def test_integer_and_mixed_axes_give_no_warnings_and_repeats_are_refused(tmp_path, capsys):
    """Reproduction 22: plain-integer and mixed-type axis values printed pydantic's serializer
    warnings; a repeated value ran twice under one scenario id."""
    import warnings

    s = tmp_path / "s.yaml"
    s.write_text(SMALL.format(model="llama2-7b").replace("[1M, 2M]", "[1000000, 2M]"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, _, err = sweep(capsys, s, tmp_path / "s.csv")
    assert code == 0 and "Warning" not in err, err
    ids = [r["scenario"] for r in rows(tmp_path / "s.csv")]
    assert len(ids) == len(set(ids)) == 2
    s.write_text(SMALL.format(model="llama2-7b").replace("[1M, 2M]", "[1000000, 2M, 1000000]"))
    refused(capsys, ["sweep", str(s), "--csv", str(tmp_path / "t.csv")], "budget", "twice")


@pytest.mark.parametrize(
    "name,text,words",
    [
        ("bool.yaml", "layers: true\nhidden: 256\nheads: 8\nvocab: 1000\nseq_len: 512\n", ()),
        (
            "dup.yaml",
            "layers: 2\nlayers: 4\nhidden: 256\nheads: 8\nvocab: 1000\nseq_len: 512\n",
            (),
        ),
        ("dup.json", '{"layers": 2, "layers": 4, "hidden": 256, "heads": 8, "vocab": 1000}', ()),
        (
            "ctl.yaml",
            'name: "x\\e[31mred\\a"\nlayers: 2\nhidden: 256\nheads: 8\nvocab: 1000\nseq_len: 64\n',
            ("name", "control character"),
        ),
    ],
    ids=["layers-true", "duplicate-yaml-key", "duplicate-json-key", "control-characters"],
)
def test_model_files_that_were_misread_are_refused(tmp_path, capsys, name, text, words):
    """Reproduction 22: `layers: true` read as 1, a duplicate key won silently, and escape
    sequences in a model name reached the terminal."""
    path = tmp_path / name
    path.write_text(text)
    line = refused(capsys, ["evaluate", "--model", str(path)], name, *words)
    assert "\x1b" not in line and "\x07" not in line
    if name.startswith("dup"):
        assert "'layers' given twice" in line
    if name == "bool.yaml":
        assert "layers: true is not a number" in line


def test_bool_numbers_are_refused_in_questions_and_catalogs(tmp_path, capsys):
    q = tmp_path / "q.yaml"
    q.write_text("model: llama2-7b\nbudget: 1M\nseq_len: true\n")
    refused(capsys, ["explain", str(q)], "seq_len", "not a number")
    cat = tmp_path / "c.yaml"
    cat.write_text("gpus:\n  h100-sxm:\n    tdp_w: true\n")
    refused(capsys, ["catalog", "--catalog", str(cat)], "gpus.h100-sxm.tdp_w", "not a number")


def test_the_bf16_and_fp16_flags_together_are_refused(capsys):
    refused(capsys, ["evaluate", "--from-megatron", MEGATRON + " --fp16"], "--fp16", "--bf16")


def test_the_study_size_is_checked_before_its_values(tmp_path, capsys):
    """load_study checks the size first: a 1000 x 1000 study with a bad value is refused
    for its size at once, not after building a question for each of its 2,000 values."""
    big = tmp_path / "big.yaml"
    budgets = ", ".join(f"{b}M" for b in range(1, 1001))
    tokens = ", ".join(f"{t}B" for t in range(1, 1000)) + ", -1B"
    big.write_text(
        f"base:\n  model: llama2-7b\naxes:\n  budget: [{budgets}]\n  tokens: [{tokens}]\n"
    )
    start = time.perf_counter()
    refused(capsys, ["sweep", str(big), "--csv", str(tmp_path / "b.csv")], "--yes")
    assert time.perf_counter() - start < 3
