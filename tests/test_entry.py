"""designer/entry.py: the console script's entry point. Until the command line is imported,
a Ctrl-C or SIGTERM ends the process at once with the one line and exit code of
designer.interrupts; afterwards Ctrl-C is Python's KeyboardInterrupt again, and a signal the
process was started ignoring stays ignored. Each case runs in a child process (no signal is
sent: the early handler is called directly, the handlers are read back)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from helpers import REPO


def _python(code: str, ignore_sigint: bool = False) -> subprocess.CompletedProcess:
    def ignore() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=ignore if ignore_sigint else None,
    )


@pytest.mark.parametrize(
    "signum,line,code",
    [
        (signal.SIGINT, "designer: interrupted (SIGINT)", 130),
        (signal.SIGTERM, "designer: terminated (SIGTERM)", 143),
        (signal.SIGUSR1, "designer: stopped", 128 + signal.SIGUSR1),
    ],
)
def test_the_early_handler_prints_one_line_and_exits_128_plus_the_signal(signum, line, code):
    proc = _python(f"import designer.entry as e; e._early_exit({int(signum)}, None); print('on')")
    assert (proc.returncode, proc.stderr, proc.stdout) == (code, line + "\n", "")


HANDLERS_AFTER = (
    "import signal, sys\n"
    "sys.argv = ['designer', '--help']\n"
    "from designer.entry import _run as main\n"
    "try:\n"
    "    main()\n"
    "except SystemExit:\n"
    "    pass\n"
    "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler,"
    " signal.getsignal(signal.SIGINT) is signal.SIG_IGN,"
    " getattr(signal.getsignal(signal.SIGTERM), '__name__', None))\n"
)


def test_after_the_import_ctrl_c_is_a_keyboard_interrupt_again():
    proc = _python(HANDLERS_AFTER)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "True False _early_exit"  # SIGTERM: until a command


def test_a_sigint_the_process_was_started_ignoring_stays_ignored():
    proc = _python(HANDLERS_AFTER, ignore_sigint=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "False True _early_exit"


def _designer(*args: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "designer", *args],
        cwd=REPO,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )


def test_the_process_ends_with_the_commands_exit_code_and_all_its_output(tmp_path):
    """main ends the process with os._exit (no interpreter teardown): the exit codes stay
    the contract's and the output is flushed whole, to a pipe and to a file."""
    ok = _designer("catalog")
    assert ok.returncode == 0 and "h100-sxm" in ok.stdout and ok.stderr == ""
    bad = _designer("optimize", "--budget", "banana")
    assert bad.returncode == 2
    assert bad.stderr.startswith("designer: error: Invalid value for '--budget'")
    out = tmp_path / "catalog.txt"
    with out.open("w") as f:
        to_file = _designer("catalog", stdout=f)
    assert to_file.returncode == 0 and out.read_text() == ok.stdout


def test_output_left_for_a_closed_pipe_exits_120_without_python_noise():
    """_leave flushing what a command left buffered into a pipe its reader closed
    (``| head -1``): Python's own status for it (120), and none of its "Exception ignored"
    lines on stderr."""
    code = (  # buffered whatever PYTHONUNBUFFERED says: the write waits for _leave's flush
        "import io, sys, designer.entry as e\n"
        "sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, 'w', closefd=False)))\n"
        "sys.stdout.write('x' * 10)\n"
        "e._leave(0)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert (proc.wait(timeout=120), err) == (120, "")


@pytest.mark.parametrize("code,status,printed", [(None, 0, ""), (3, 3, ""), ("boom", 1, "boom\n")])
def test_exit_code_follows_pythons_rules_for_system_exit(code, status, printed, capsys):
    from designer.entry import _exit_code

    assert _exit_code(code) == status
    assert capsys.readouterr().err == printed


def test_a_process_that_loaded_ray_exits_the_usual_way():
    """_leave with Ray loaded (a sweep on a cluster) leaves by SystemExit, so that Ray's
    exit handler runs: a stand-in ``ray`` module's atexit handler prints."""
    code = (
        "import atexit, sys, types, designer.entry as e\n"
        "sys.modules['ray'] = types.ModuleType('ray')\n"
        "atexit.register(lambda: print('disconnected'))\n"
        "e._leave(3)\n"
    )
    proc = _python(code)
    assert (proc.returncode, proc.stdout) == (3, "disconnected\n")


def test_output_to_a_pipe_the_reader_closed_ends_quietly():
    """``designer catalog | head -1``: the reader closes the pipe before the command writes;
    the command ends as click ends a closed pipe (status 1, Python's advice for SIGPIPE),
    not with an "internal error" line, and nothing reaches stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "designer", "catalog"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert (proc.wait(timeout=120), err) == (1, "")
