"""Non-finite numbers end a run (docs/runtime.md, "Non-finite numbers").

The collector checks what it hands on each step (the actions it was answered, the observations,
every reward term and their sum); the learner checks what its updates wrote (losses, the Q
estimate, the temperature). The first NaN or infinity ends the run as `non_finite`, naming the
iteration and the tensor (for a reward, the term): a run whose numbers diverged never ends
`completed`, and nothing downstream averages a NaN away.

On the CPU each check is read at once, so the run stops at the iteration it names. On a GPU a read
would be a host sync per step: the flags stay on the device and are read together where the process
reads the device anyway (the collector's metric publication, the learner's log flush), and before a
failure is classified, so the first non-finite iteration is still the one named.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from soaklab.files.jsonfiles import read_json, write_json_atomic

CLASSIFICATION = "non_finite"
NUMPY_FLOATS = (torch.float16, torch.float32, torch.float64)  # what .numpy() takes (not bfloat16)


class NonFinite(Exception):
    def __init__(self, iteration: int, tensor: str, term: str | None = None) -> None:
        self.iteration, self.tensor, self.term = iteration, tensor, term
        where = f"{tensor} (term {term})" if term else tensor
        super().__init__(f"non-finite {where} at iteration {iteration}")

    def record(self) -> dict[str, Any]:
        return {"iteration": self.iteration, "tensor": self.tensor, "term": self.term, "message": str(self)}

    def write(self, path: Path) -> None:
        write_json_atomic(path, self.record())

    @classmethod
    def read(cls, path: Path) -> NonFinite | None:
        """The collector's report (its process is gone; the file is how its finding reaches the learner)."""
        try:
            found = read_json(path)
            return cls(int(found["iteration"]), str(found["tensor"]), found.get("term"))
        except (OSError, ValueError, KeyError, TypeError):
            return None


def non_finite_flags(values: list[torch.Tensor]) -> torch.Tensor:
    """One flag per tensor: True where it holds a NaN or an infinity.

    Fused, because the collector checks about twenty tensors a step and on a GPU
    `~isfinite(v).all()` is two kernel launches each: x * 0 is 0 for every finite x and NaN for an
    infinity or a NaN, and a sum carries a NaN through, so the L1 norm of x * 0 is 0 exactly when x
    is finite (no overflow either, unlike a norm of x itself). `_foreach_mul`/`_foreach_norm` (what
    torch's optimizers and clip_grad_norm_ fuse with) do that for all the tensors in a few launches.
    An empty tensor is finite; a non-float one cannot hold a NaN. On the CPU, where the flags are read
    at once anyway, numpy's isfinite per tensor is quicker still (a quarter of the fused ops' time for
    G1's 15 tensors at 64 envs)."""
    flags = torch.zeros(len(values), dtype=torch.bool, device=values[0].device if values else "cpu")
    checked = [i for i, v in enumerate(values) if v.is_floating_point() and v.numel()]
    if not checked:
        return flags
    if flags.device.type == "cpu" and all(values[i].dtype in NUMPY_FLOATS for i in checked):
        return torch.tensor([v.is_floating_point() and not np.isfinite(v.detach().numpy()).all() for v in values],
                            dtype=torch.bool)
    zeroed = torch._foreach_mul([values[i] for i in checked], 0.0)
    norms = torch.stack(torch._foreach_norm(zeroed, ord=1))
    if len(checked) == len(values):
        return norms != 0  # NaN != 0 is True, 0 != 0 is False
    return flags.index_put((torch.tensor(checked, device=flags.device),), norms != 0)


class FiniteWatch:
    """Finiteness flags of named tensors, read at once on the CPU and in batches on a GPU."""

    def __init__(self, device: torch.device) -> None:
        self.deferred = device.type == "cuda"
        self.pending: list[tuple[int, tuple[tuple[str, str | None], ...], torch.Tensor]] = []

    def check(self, iteration: int, tensors: dict[str, torch.Tensor], terms: dict[str, torch.Tensor] | None = None,
              term_of: str = "reward") -> None:
        """`tensors` by name; `terms` (each [N]) are named `term_of` with the term beside it, and come
        first: a NaN term makes its sum NaN too, and the term is the finding."""
        names = [(term_of, term) for term in terms or {}] + [(name, None) for name in tensors]
        values = [*(terms or {}).values(), *tensors.values()]
        self.flags(iteration, tuple(names), non_finite_flags(values))

    def flags(self, iteration: int, names: tuple[tuple[str, str | None], ...], bad: torch.Tensor) -> None:
        """Precomputed flags (True: that tensor holds a non-finite value), one per name."""
        self.pending.append((iteration, names, bad))
        if not self.deferred:
            self.drain()

    def drain(self) -> None:
        """Read every pending flag (one device read) and raise the first non-finite value."""
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        read = torch.cat([bad.reshape(-1) for _, _, bad in pending]).cpu().tolist()
        at = 0
        for iteration, names, _ in pending:
            for (tensor, term), bad in zip(names, read[at:at + len(names)], strict=True):
                if bad:
                    raise NonFinite(iteration, tensor, term)
            at += len(names)
