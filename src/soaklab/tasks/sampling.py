"""Reset frame sampling for motion tracking: uniform, or adaptive toward failures (DESIGN §7)."""

from __future__ import annotations

import torch

from soaklab.tasks.rng import ManagerRng


class FrameSampler:
    """Start frames for resets.

    Adaptive mode keeps a decaying failure count per clip frame and draws start
    frames weighted by the failures in the following `lookahead` frames, so
    episodes start shortly before the parts of the clip that keep failing; a
    `uniform_ratio` share of the probability stays uniform so every frame is
    still visited.
    """

    def __init__(self, num_frames: int, rng: ManagerRng, mode: str, uniform_ratio: float, alpha: float,
                 lookahead: int) -> None:
        if mode not in ("uniform", "adaptive"):
            raise ValueError(f"sampler mode {mode!r}")
        self.mode = mode
        self.rng = rng
        # The last frame cannot start an episode: there is no next reference frame.
        self.num_starts = num_frames - 1
        self.uniform_ratio = uniform_ratio
        self.alpha = alpha
        self.lookahead = lookahead
        self.failures = torch.zeros(num_frames, device=rng.device)

    def probabilities(self) -> torch.Tensor:
        n = self.num_starts
        uniform = torch.full((n,), 1.0 / n, device=self.failures.device)
        if self.mode == "uniform" or float(self.failures.sum()) == 0.0:
            return uniform
        # Failures in [f, f + lookahead) for each start f, by a cumulative sum.
        csum = torch.cat([self.failures.new_zeros(1), self.failures.cumsum(0)])
        ends = torch.clamp(torch.arange(n, device=csum.device) + self.lookahead, max=len(self.failures))
        window = csum[ends] - csum[:n]
        weighted = window / window.sum()
        return self.uniform_ratio * uniform + (1 - self.uniform_ratio) * weighted

    def sample(self, count: int) -> torch.Tensor:
        if self.mode == "uniform":
            return self.rng.randint(self.num_starts, (count,))
        return self.rng.categorical(self.probabilities(), count)

    def record(self, failed_frames: torch.Tensor) -> None:
        """Decay old counts and add the frames where episodes just failed."""
        if self.mode != "adaptive":
            return
        self.failures.mul_(1 - self.alpha)
        if failed_frames.numel():
            self.failures.index_add_(0, failed_frames, torch.ones_like(failed_frames, dtype=self.failures.dtype))
