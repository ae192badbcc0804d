"""The question: its fields, the Scenario built from it, saved answers."""
