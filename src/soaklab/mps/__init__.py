"""CUDA MPS lifecycle (DESIGN §10)."""
