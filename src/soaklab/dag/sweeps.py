"""Sweeps: a `sweeps:` entry of the workflow config expanded into ordinary runs.

A sweep starts from one run under `runs:` (its `base`) and takes the product of its `matrix` axes
and, optionally, its named `override_sets`. Each point of the product is a run like any other, with
its own results/{run} and logs/{run}; the name says where in the sweep it lies:

    sweeps:
      grid:
        base: cpu
        matrix: {algo: [sac, flashsac], algo.num_envs: [8, 16], seed: [1, 2]}
        override_sets: {base: {}, wide: {algo.critic_hidden: 512}}

gives `grid-sac-num_envs8-seed1-base`, ... (16 runs). An axis is `algo`, `task` or `sim` (the run's
own fields), `seed` (both seeds of the run: env.seed and algo.seed), or any config key, which becomes
an override. Values are checked where every override is, by `soaklab config resolve` in the run's
own branch: one bad value fails that run alone.

The Snakefile loads this module by path before the package is importable, so it uses only the
standard library.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from dataclasses import dataclass
from typing import Any

RUN_FIELDS = ("algo", "task", "sim")
SEED_AXIS = "seed"
SEED_KEYS = ("env.seed", "algo.seed")
# A sweep of more runs than this is a typo (an axis listed twice, a range pasted in), not a plan.
MAX_SWEEP_RUNS = 1000
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
# results/assets, results/sweeps and results/reproduce belong to the DAG.
RESERVED_RUN_NAMES = ("assets", "sweeps", "reproduce")


class SweepError(ValueError):
    """A sweep that cannot be expanded; the message names the setting."""


@dataclass(frozen=True)
class SweepRun:
    name: str
    axes: dict[str, Any]  # axis -> this run's value (the override set by its name)
    run: dict[str, Any]  # the run as under `runs:` (algo, task, sim, overrides, soak, resources)


@dataclass(frozen=True)
class Sweep:
    name: str
    base: str
    runs: tuple[SweepRun, ...]

    @property
    def run_names(self) -> list[str]:
        return [r.name for r in self.runs]

    def plan(self) -> dict[str, Any]:
        """What `soaklab sweep-summary` needs to lay out the table: each run's axis values, in order."""
        return {"sweep": self.name, "base": self.base, "runs": {r.name: r.axes for r in self.runs}}


def _label(axis: str, value: Any) -> str:
    """The part of a run name one axis gives: the value for the run's own fields, else key+value."""
    # YAML's spelling for true/false/null (Python's str gives True/False/None)
    text = json.dumps(value) if isinstance(value, bool) or value is None else str(value)
    text = _UNSAFE.sub("_", text).strip("_") or "_"
    if axis in RUN_FIELDS:
        return text
    return f"{axis.rsplit('.', 1)[-1]}{text}"


def expand_sweep(name: str, spec: dict[str, Any], runs: dict[str, Any]) -> Sweep:
    where = f"sweeps.{name}"
    base_name = spec["base"]
    if base_name not in runs:
        raise SweepError(f"{where}.base: {base_name!r} is not defined under runs: (defined: {', '.join(sorted(runs))})")
    base = runs[base_name]
    matrix: dict[str, list[Any]] = dict(spec["matrix"])
    sets: dict[str, dict[str, Any]] = dict(spec.get("override_sets") or {})
    for set_name, overrides in sets.items():
        for key in overrides:
            clash = key if key in matrix else SEED_AXIS if key in SEED_KEYS and SEED_AXIS in matrix else None
            if clash:
                raise SweepError(f"{where}.override_sets.{set_name}.{key}: also a matrix axis ({clash}); "
                                 "set it in one place")
    if SEED_AXIS in matrix and any(k in matrix for k in SEED_KEYS):
        raise SweepError(f"{where}.matrix: seed sets {' and '.join(SEED_KEYS)}; drop one of the two axes")
    axes = list(matrix.items())
    if sets:
        axes.append(("override_set", list(sets)))
    total = 1
    for _, values in axes:
        total *= len(values)
    if total > MAX_SWEEP_RUNS:
        raise SweepError(f"{where}: expands to {total:,} runs (at most {MAX_SWEEP_RUNS:,}); split the sweep")

    expanded: list[SweepRun] = []
    seen: dict[str, dict[str, Any]] = {}
    for point in itertools.product(*(values for _, values in axes)):
        values = {axis: value for (axis, _), value in zip(axes, point, strict=True)}
        run = copy.deepcopy(base)
        overrides = dict(run.get("overrides") or {})
        labels = []
        for axis, value in values.items():
            if axis == "override_set":
                overrides.update(sets[value])
                labels.append(_UNSAFE.sub("_", value))
            elif axis in RUN_FIELDS:
                run[axis] = value
                labels.append(_label(axis, value))
            elif axis == SEED_AXIS:
                overrides.update(dict.fromkeys(SEED_KEYS, value))
                labels.append(_label(axis, value))
            else:
                overrides[axis] = value
                labels.append(_label(axis, value))
        run["overrides"] = overrides
        run_name = "-".join([name, *labels])
        if run_name in seen:
            raise SweepError(f"{where}: {values} and {seen[run_name]} both name run {run_name!r}; "
                             "make the values differ in letters, digits, '.', '_' or '-'")
        if run_name in runs:
            raise SweepError(f"{where}: run {run_name!r} is also defined under runs:; rename the sweep or the run")
        seen[run_name] = values
        expanded.append(SweepRun(run_name, values, run))
    return Sweep(name, base_name, tuple(expanded))


def expand_sweeps(sweeps: dict[str, Any], runs: dict[str, Any]) -> dict[str, Sweep]:
    """Every sweep, expanded; a run name two sweeps would share fails closed."""
    expanded = {name: expand_sweep(name, spec, runs) for name, spec in (sweeps or {}).items()}
    owner: dict[str, str] = {}
    for sweep in expanded.values():
        for run_name in sweep.run_names:
            if run_name in owner:
                raise SweepError(f"sweeps.{sweep.name}: run {run_name!r} is also a run of sweeps.{owner[run_name]}")
            owner[run_name] = sweep.name
    return expanded
