"""G1 model and motion clip materialization (DESIGN §6)."""
