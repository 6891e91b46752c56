"""The off-policy runtime (DESIGN §8): learner and collector processes, shared-memory
inference ring and replay ingress, replay ring, SAC and FlashSAC, run artifacts."""
