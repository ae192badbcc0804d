"""What the commands write: the answer of optimize, explain and compare in the contract's
JSON, CSV rows, text tables and paragraph (``formats.py``), plain-text tables and numbers
(``text.py``), the other commands' documents (``breakeven_doc.py``, ``catalog_doc.py``,
``dry_run_doc.py`` for evaluate), plots (``plots.py``), a study's results CSV
(``study_csv.py``), spreadsheet-safe cells (``cells.py``) and output files that never
half-write or overwrite an input (``files.py``).

May import: catalog/, models/, solvers/, designer/question/ and designer's errors.py,
numbers.py, pricing.py and confidence.py; never designer/report/ or the command line.
"""
