"""Metric extraction from a run's TensorBoard event file (docs/soak.md)."""
