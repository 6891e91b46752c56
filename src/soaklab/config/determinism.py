"""`training.deterministic` at resolution: what the mode refuses, before anything is written or
spawned (docs/determinism.md, "Refusals").

The mode holds only where every source of difference is closed (the audit in docs/determinism.md):
the backend must have a deterministic mode at the installed versions (its catalogue entry's
`deterministic`), and no setting may make the run depend on timing or on a collective whose
reduction order is not fixed.
"""

from __future__ import annotations

from collections.abc import Callable

from soaklab.catalogue import BACKENDS
from soaklab.config.compose import ComposedConfig
from soaklab.contract.ranks import RankPlan
from soaklab.errors import InvalidInput, SettingError
from soaklab.host.determinism import installed_versions, lacking, not_exact

KEY = "training.deterministic"


def check_deterministic(composed: ComposedConfig, ranks: RankPlan,
                        versions: Callable[[tuple[str, ...]], dict[str, str | None]] = installed_versions) -> None:
    """Refuse `training.deterministic: true` with what cannot be made deterministic, in one line
    naming the setting (or the versions found and the minimum). `versions`: the installed versions
    of the named distributions (a test gives other ones)."""
    if composed.get(KEY) is not True:
        return
    backend = BACKENDS[composed.sim]
    if backend.deterministic is None:
        raise InvalidInput(f"{KEY}=true: sim {composed.sim} declares no deterministic mode (its catalogue "
                           "entry's `deterministic` is None); train it with training.deterministic=false")
    if backend.deterministic:
        short = lacking(backend.deterministic, versions(tuple(name for name, _ in backend.deterministic)))
        if short:
            raise InvalidInput(f"{KEY}=true: sim {composed.sim} repeats bit for bit only from "
                               f"{', '.join(f'{n} {v}' for n, v in backend.deterministic)} on; found "
                               f"{', '.join(short)}: install those versions or set {KEY}=false")
    if backend.deterministic_exact:
        other = not_exact(backend.deterministic_exact, versions(tuple(n for n, _ in backend.deterministic_exact)))
        if other:
            raise InvalidInput(f"{KEY}=true: sim {composed.sim}'s deterministic mode installs soaklab's contact "
                               f"and constraint sorts into the hooks of "
                               f"{', '.join(f'{n} {v}' for n, v in backend.deterministic_exact)} only; found "
                               f"{', '.join(other)}: install that version or set {KEY}=false")
    if ranks.parallel:
        # Each rank's gradients meet in an all-reduce whose reduction order the transport picks.
        raise SettingError("training.dp_ranks", composed.get("training.dp_ranks"),
                           f"the deterministic mode is for one rank ({ranks.world_size} resolved here): "
                           "set training.dp_ranks=1 or training.deterministic=false")
    minutes = composed.get("training.max_wall_minutes")
    if minutes is not None:
        # Where a wall-clock budget stops the run depends on the machine's speed that day.
        raise SettingError("training.max_wall_minutes", minutes,
                           "ends a run at a time, not an iteration, so its length never repeats: bound a "
                           "deterministic run with algo.max_iterations (training.max_wall_minutes=null)")
