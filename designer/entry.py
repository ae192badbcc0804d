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
    """Run the command (_run), then end the process without tearing the interpreter down
    (_leave)."""
    _leave(_run())


def _run() -> int:
    """Install the early handlers, import the command line, run it; its exit code. A signal
    the process was started ignoring (a background job of a script ignores Ctrl-C) stays
    ignored."""
    ignored = {s for s in _LINES if _signal.getsignal(s) == _signal.SIG_IGN}
    for signum in set(_LINES) - ignored:
        _signal.signal(signum, _early_exit)
    # lazy: the handlers above go in before the command line and its imports load (a
    # Ctrl-C during them exits quietly), and those imports keep the solver stack out
    from designer.cli import main as cli_main

    if _signal.SIGINT not in ignored:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    try:
        cli_main(sys.argv[1:])
    except SystemExit as ex:
        return _exit_code(ex.code)
    return 0


def _exit_code(code: object) -> int:
    """The process's exit status for ``SystemExit(code)``, as Python gives it: None is 0,
    an integer itself, anything else printed on stderr and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _leave(code: int) -> None:
    """Flush the output and end the process with ``code``, skipping the interpreter's
    teardown: freeing the solver's caches (millions of small objects: shapes, their
    coefficients and memory terms) one by one took 0.7-0.8 s after a MoE optimize had
    printed its answer (bench/side_by_side.py). Nothing is lost by skipping it: the
    commands write their files whole before they return (designer.output.files) and join
    the processes and threads they start. A sweep run on Ray (``--executor
    ray``) exits the usual way instead, so that Ray's own exit handler disconnects the
    driver from its cluster. Output to a closed pipe (``| head``) ends with Python's own
    status for it, 120, without its "Exception ignored" lines."""
    try:
        sys.stdout.flush()
    except OSError:
        code = code or 120
    try:
        sys.stderr.flush()
    except OSError:
        pass
    if "ray" in sys.modules:
        sys.exit(code)
    os._exit(code)


if __name__ == "__main__":
    main()
