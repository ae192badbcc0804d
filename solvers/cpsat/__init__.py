"""The CP-SAT formulation of the design question, one module per part, and its solve.

``model.py`` builds the model from the parts, in order: ``context.py`` (what the parts
share while the model is built), ``time.py`` (the step's terms and the time per sequence,
with the mixture-of-experts terms of ``expert.py``), ``batch_tokens.py``, ``goodput.py``
(failures, checkpoints, restarts), ``cluster.py`` and ``cost.py`` (fabric, racks, power,
the price; ``gpu_time_cap.py`` the cost's rates), ``purchases.py`` (hot spares, checkpoint
storage). ``solve.py`` solves it over the shapes solvers/screen/ keeps: warm start,
incumbent, top K (``solve_cpsat``).

May import: catalog/, models/ and solvers/' lower floors (scenario, space, decisions,
intmath, limits, families/, screen/, plan, purchases, purchase_rule, result, stop,
gc_pause, cloud_terms); never solvers/explain.py, solvers/exhaustive.py or designer/. The
parts import only ``context.py``, ``intmath``, ``cluster.py`` and the scenario; only
``model.py`` assembles them.
"""
