"""`ManagerRng`: the env's only source of randomness (docs/assets-and-tasks.md).

A thin adapter over one explicit `torch.Generator` on the env's tensor device:
it validates seeds, returns tensors on that device, and its state round-trips
exactly through `get_state()`/`set_state()`. It is not a NumPy bitstream.
"""

from __future__ import annotations

import torch

from soaklab.contract.contract import MAX_SEED, is_exact_int
from soaklab.errors import SettingError


class ManagerRng:
    def __init__(self, seed: object, device: torch.device | str = "cpu", key: str = "env.seed") -> None:
        if not is_exact_int(seed) or not 0 <= seed <= MAX_SEED:  # type: ignore[operator]
            raise SettingError(key, seed, f"must be an exact int in 0..{MAX_SEED}")
        self.device = torch.device(device)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(int(seed))  # type: ignore[arg-type]

    def uniform(self, shape: tuple[int, ...], low: float | torch.Tensor = 0.0,
                high: float | torch.Tensor = 1.0) -> torch.Tensor:
        u = torch.rand(shape, generator=self.generator, device=self.device)
        return low + (high - low) * u

    def randint(self, high: int, shape: tuple[int, ...]) -> torch.Tensor:
        return torch.randint(0, high, shape, generator=self.generator, device=self.device)

    def categorical(self, probs: torch.Tensor, count: int) -> torch.Tensor:
        """`count` draws from one categorical distribution `probs` (with replacement)."""
        return torch.multinomial(probs, count, replacement=True, generator=self.generator)

    def get_state(self) -> torch.Tensor:
        """The generator state as a CPU byte tensor: the authoritative reproducibility payload."""
        return self.generator.get_state().clone()

    def set_state(self, state: torch.Tensor) -> None:
        self.generator.set_state(state.clone())
