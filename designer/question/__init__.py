"""The question a user asks: its fields declared once (``fields.py``: type, bounds, unit,
help, command-line flag, key in a saved answer, column in a study's CSV), the solver's
Scenario built from it with errors that name the option or the file's field
(``build.py``: options, question files, saved answers), and a saved answer's plans
validated on reading (``saved_answer.py``).

May import: catalog/, models/, solvers/ and designer's errors.py and numbers.py; never
designer/output/, designer/report/ or the command line (cli.py, options.py).
"""
