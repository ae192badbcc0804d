"""Screening the shapes before the search: valid bounds per shape (``bounds.py``), presolve
(``presolve.py``: the candidates the enforced families leave) and pruning by bound with an
incumbent (``prune.py``). solvers/cpsat/ builds its model over what they keep; the
explanations (solvers/explain.py) and designer/alternatives.py reuse them.

May import: catalog/, models/ and solvers/' lower floors (scenario, space, decisions,
intmath, purchases, families/, plan, grid_search); never solvers/cpsat/,
solvers/exhaustive.py, solvers/explain.py or designer/.
"""
