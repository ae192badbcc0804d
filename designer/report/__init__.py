"""`designer report`: a saved answer, a compare or breakeven result or a study's CSV as
one data structure (``data.py``; ``study.py`` for a study, ``catalog.py`` the catalog
entries its plans use), laid out as an HTML page (``html.py``, ``charts.py``) and a
workbook (``xlsx.py``) from the same cells (``tables.py``); ``command.py`` writes them.

May import: catalog/, models/, solvers/, designer/question/, designer/output/ and
designer's answer.py, errors.py, numbers.py, pricing.py and sweep.py. Only the command
line (designer/cli.py) imports it.
"""
