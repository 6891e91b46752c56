"""The off-policy runtime (docs/runtime.md): learner and collector processes, shared-memory
inference ring and replay ingress, replay ring, SAC and FlashSAC, run artifacts."""
