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
    "from designer.entry import main\n"
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
