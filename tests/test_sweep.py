"""designer/sweep.py: the results file that knows its study (resume, the lock, files it
does not recognise), a study validated whole before anything runs, its size limit, the
worker count and a dead worker. From issue 20's checklist (reproductions 1-3, 5, 6, 9, 10,
22); each test names the reproduction it covers."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time

import pytest

from helpers import SMALL, _started_sweep, one_line, refused, rows, run_main, study, sweep


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
