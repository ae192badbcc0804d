"""designer: GPU cluster and parallel-layout design for LLM training.

The command line and what it writes: ``entry.py`` (the console entry point, signals first),
``cli.py`` (each command parses its options, calls one library function, prints;
``options.py`` the options of commands other than the question's, ``exit_codes.py`` errors
as one line and an exit code), the question (``question/``), the answer's formats and files
(``output/``), ``designer report`` (``report/``), plans to launches (``launch/``), and the
commands' library functions (``answer.py``, ``compare.py``, ``sweep.py``, ``breakeven.py``,
``dry_run.py`` for evaluate, ``alternatives.py``, ``confidence.py``, ``pricing.py``).

May import: catalog/, models/ and solvers/ (the top layer; nothing imports designer/)."""

__version__ = "0.1.0"
