"""G1 model and motion clip materialization (docs/assets-and-tasks.md)."""
