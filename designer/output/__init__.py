"""The answer as JSON, CSV, text tables and plots, and the files written."""
