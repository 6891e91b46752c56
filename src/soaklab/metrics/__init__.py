"""Metric extraction from a run's TensorBoard event file (DESIGN §9)."""
