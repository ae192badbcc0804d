"""Screening shapes before the search: bounds, presolve and pruning."""
