"""The learner's guards: finiteness (soaklab.rl.finite) and divergence (soaklab.rl.diverged).

The learner hands them what it checks at each step of an iteration: the flags its updates wrote,
the rewards it took in, the rows it logged. On the CPU a non-finite value raises at once; on a GPU
the flags are read with the logged rows (`drain`), and before a failure is classified
(`first_non_finite`), so the iteration named is still the first one."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from soaklab.rl.diverged import DivergenceWatch
from soaklab.rl.finite import FiniteWatch, NonFinite
from soaklab.rl.logging import EpisodeStats


class Guards:
    """`non_finite_path`: where this rank's collector reports the first non-finite value it saw."""

    def __init__(self, device: torch.device, num_envs: int, non_finite_path: Path) -> None:
        self.non_finite_path = non_finite_path
        non_finite_path.unlink(missing_ok=True)  # only this run's collector may report one
        self.finite = FiniteWatch(device)
        self.divergence = DivergenceWatch(num_envs)
        self.diag_checked: tuple[tuple[str, str | None], ...] = ()

    def watch_diagnostics(self, diag_names: tuple[str, ...]) -> None:
        """The agent's diagnostics, named as its losses are (`loss/<name>`)."""
        self.diag_checked = tuple((f"loss/{name}", None) for name in diag_names)

    def updated(self, iteration: int, flags: torch.Tensor) -> None:
        """The flags of an update round (OffPolicyAgent.non_finite_diagnostics)."""
        self.finite.flags(iteration, self.diag_checked, flags)

    def rewards(self, iteration: int, rewards: torch.Tensor) -> None:
        # The collector checked them; on a GPU its flags are read only at its next metric
        # publication, and an update may fail on them first (this flag names the cause then).
        self.finite.check(iteration, {"reward": rewards})

    def drain(self) -> None:
        """Read the pending flags (one device read) and raise the first non-finite value."""
        self.finite.drain()

    def logged(self, rows: Sequence[tuple[int, float, dict[str, float | None]]], stats: EpisodeStats) -> None:
        """The rows just written (so the event file holds what a Diverged names), in order."""
        for it, _, values in rows:
            self.divergence.observe(it, values)
        if rows:
            self.divergence.check_episodes(rows[-1][0], stats.finished_lengths, stats.finished_lengths.maxlen or 0)

    def first_non_finite(self) -> tuple[str, NonFinite] | None:
        """The earliest non-finite value the collector reported or this learner's pending flags hold."""
        found: list[tuple[str, NonFinite]] = []
        collector = NonFinite.read(self.non_finite_path)
        if collector is not None:
            found.append(("collector", collector))
        try:
            self.finite.drain()
        except NonFinite as exc:
            found.append(("learner", exc))
        except Exception:  # a device that failed cannot be read; the failure stands as it is
            pass
        return min(found, key=lambda f: f[1].iteration) if found else None
