"""The CP-SAT formulation (one module per part of the model) and its solve."""
