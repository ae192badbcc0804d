"""The `designer` command's entry point: signal handling installed before the heavy imports
(issue 33). Importing the command line (pydantic, numpy, the catalog) takes about 0.35 s; a
Ctrl-C or SIGTERM in that time printed a Python traceback or killed the process without a
word. Until the command line is imported either signal ends the process at once with the
one line and the exit code of designer.interrupts (130, 143): nothing has been written yet,
so there is nothing to clean up. Afterwards Ctrl-C is Python's KeyboardInterrupt again
(designer.cli reports it) and SIGTERM keeps this handler until a command installs its own."""

import _signal  # the C module: `signal` imports enum first, itself a window for a traceback
import os
import sys

_LINES = {
    _signal.SIGINT: b"designer: interrupted (SIGINT)\n",
    _signal.SIGTERM: b"designer: terminated (SIGTERM)\n",
}


def _early_exit(signum, frame):  # type: ignore[no-untyped-def]
    os.write(2, _LINES.get(signum, b"designer: stopped\n"))
    os._exit(128 + signum)


def main() -> None:
    """Install the early handlers, import the command line, run it. A signal the process was
    started ignoring (a background job of a script ignores Ctrl-C) stays ignored."""
    ignored = {s for s in _LINES if _signal.getsignal(s) == _signal.SIG_IGN}
    for signum in set(_LINES) - ignored:
        _signal.signal(signum, _early_exit)
    # lazy: the handlers above go in before the command line and its imports load (a
    # Ctrl-C during them exits quietly), and those imports keep the solver stack out
    from designer.cli import main as cli_main

    if _signal.SIGINT not in ignored:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    cli_main(sys.argv[1:])


if __name__ == "__main__":
    main()
