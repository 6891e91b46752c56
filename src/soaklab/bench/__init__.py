"""Benchmarks that write JSON evidence under benchmarks/ (never timed assertions in tests)."""
