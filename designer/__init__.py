"""designer: GPU cluster and parallel-layout design for LLM training."""

__version__ = "0.1.0"
