"""CUDA MPS lifecycle (docs/mps.md)."""
