"""Benchmark records: what a record folder holds, read and checked (docs/records.md).

    records/<name>/record.yaml                          the spec: the run, its seeds, what is compared and how
    records/<name>/machines/<kind>/provenance.json      commit, date, command, machine kind and versions
    records/<name>/machines/<kind>/runs/seed<N>/        the artifacts of record of each seed's run

A record holds one set of artifacts per machine kind it was made on: bitwise CPU series do not
survive a change of CPU model, so a cpu record made on one model is not comparable on another, and
the same spec recorded on both is reproduced on either.

Each seed of a record is an ordinary run of the workflow (`rec-<name>-seed<N>`, with env.seed and
algo.seed set to the seed), soaked, measured and validated by the same rules as any other run; the
`reproduce` target compares them with the record. A spec that is malformed, or names a figure the
run cannot produce, fails when the DAG loads, before anything runs.

The Snakefile loads this module by path before the package is importable: it uses the standard
library, PyYAML and jsonschema (both dependencies of Snakemake itself), and nothing of soaklab.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SPEC = "record.yaml"
MACHINES = "machines"
PROVENANCE = "provenance.json"
RUNS = "runs"
SNAPSHOT = "snapshot.json"
SEED_KEYS = ("env.seed", "algo.seed")
NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
PACKAGE = Path(__file__).resolve().parent.parent
SCHEMA = PACKAGE / "schemas" / "record.schema.json"
# The run setting a numerics profile fixes (its threads), as it fixes the seeds.
THREADS_KEY = "env.num_threads"
DETERMINISTIC_KEY = "training.deterministic"  # a gpu record with it true is compared bit for bit
DETERMINISTIC_KIND = ", deterministic"  # how such a run's machine kind ends (records.snapshot.machine_kind)


def _by_path(name: str, relative: str) -> Any:
    """A standard-library-only module of the package, loaded by path as this module is by the DAG
    (once per process: kept in sys.modules, where dataclasses look their module up)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, PACKAGE / relative)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


# The catalogue, installed plug-ins included (the DAG loads it under the same name first).
CATALOGUE = _by_path("soaklab_catalogue", "catalogue/__init__.py")
# Tasks whose env logs the tracking errors and the time-out share.
TRACKING_TASKS = CATALOGUE.tracking_tasks()

# Timing figures: a Perf/ series over the run's steady state (its median; the sum per iteration for
# the lump-logged collector phases), compared as a ratio.
TIMING = {
    "env_steps_per_s": "Perf/total_fps",
    "iteration_ms": "Perf/iteration_ms",
    "learner_update_ms": "Perf/learner_update_ms",
    "learner_inference_ms": "Perf/learner_inference_ms",
    "collector_env_step_ms": "Perf/collector_env_step_ms",
}
# Learning figures: the mean of a Train/ series over the logged iterations up to a fixed env-step
# count, compared across seeds with a bootstrap interval. The tasks that log each (None: every task).
LEARNING = {
    "mean_reward": ("Train/mean_reward", None),
    "timeout_fraction": ("Train/timeout_fraction", TRACKING_TASKS),
    "body_pos_error_m": ("Train/tracking/body_pos_error_m", TRACKING_TASKS),
    "joint_pos_error_rad": ("Train/tracking/joint_pos_error_rad", TRACKING_TASKS),
}
RULE_OF = {**dict.fromkeys(TIMING, "ratio"), **dict.fromkeys(LEARNING, "bootstrap")}


class RecordError(ValueError):
    """A record that cannot be used; the message names the record and the field."""


numerics = _by_path("soaklab_host_numerics", "host/numerics.py")


@dataclass(frozen=True)
class Figure:
    name: str
    rule: str  # ratio | bootstrap
    band: tuple[float, float] | None = None  # ratio
    tolerance: float | None = None  # bootstrap
    relative: bool = False  # bootstrap: tolerance as a fraction of the record's mean
    at_env_steps: int | None = None  # learning figures
    noisy: bool = False  # ratio: the history's regression verdict warns on it, never fails

    @property
    def key(self) -> str:
        """The figure's name in snapshots and comparisons: learning figures carry their env-step count."""
        return self.name if self.at_env_steps is None else f"{self.name}@{self.at_env_steps}"

    @property
    def tag(self) -> str:
        return TIMING[self.name] if self.name in TIMING else LEARNING[self.name][0]


@dataclass(frozen=True)
class Threshold:
    figure: Figure  # name and at_env_steps; the rule fields unused
    low: float | None
    high: float | None


@dataclass(frozen=True)
class RecordRun:
    seed: int
    name: str  # the workflow run: rec-<record>-seed<N>
    run: dict[str, Any]  # as under runs: of the workflow config, the seeds set

    @property
    def label(self) -> str:
        return f"seed{self.seed}"


@dataclass(frozen=True)
class Record:
    name: str
    folder: Path
    description: str
    machine: str  # cpu | gpu
    exact: bool
    runs: tuple[RecordRun, ...]
    figures: tuple[Figure, ...]
    thresholds: tuple[Threshold, ...]
    ci: bool = False  # CI reproduces it on every run (a cpu record CI's budget affords)
    numerics: Any = None  # a bitwise cpu record's soaklab.host.numerics.NumericsProfile

    @property
    def run_names(self) -> list[str]:
        return [r.name for r in self.runs]

    @property
    def algo(self) -> str:
        return self.runs[0].run["algo"]

    @property
    def task(self) -> str:
        return self.runs[0].run["task"]

    @property
    def sim(self) -> str:
        return self.runs[0].run["sim"]

    @property
    def ranks(self) -> int:
        ranks = (self.runs[0].run.get("overrides") or {}).get("training.dp_ranks")
        return ranks if isinstance(ranks, int) and ranks >= 1 else 1

    def artifact_folders(self) -> list[Path]:
        """The folder of each machine kind a record was made on (its provenance written), in name order."""
        base = self.folder / MACHINES
        folders = sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
        return [f for f in folders if (f / PROVENANCE).is_file()]

    def artifact_sets(self) -> list[Path]:
        """The folder of each machine kind's complete artifacts of record, in name order."""
        return [f for f in self.artifact_folders()
                if all((f / RUNS / r.label / SNAPSHOT).is_file() for r in self.runs)]

    def artifacts_of(self, machine_kind: str) -> Path:
        """Where the artifacts of record made on `machine_kind` live (or would)."""
        return self.folder / MACHINES / machine_slug(machine_kind)

    def has_artifacts(self) -> bool:
        return bool(self.artifact_sets())

    def artifact_files(self) -> list[Path]:
        """The files of record that exist (the compare rule's inputs: a new record replans it)."""
        return [f for s in self.artifact_sets() for f in (s / PROVENANCE, *(s / RUNS / r.label / SNAPSHOT
                                                                             for r in self.runs))]


def machine_slug(machine_kind: str) -> str:
    """A machine kind as a folder name: 'cpu: AMD EPYC x2' -> 'cpu-amd-epyc-x2'."""
    return re.sub(r"[^a-z0-9]+", "-", machine_kind.lower()).strip("-") or "unknown"


def run_name(record: str, seed: int) -> str:
    return f"rec-{record}-seed{seed}"


def _yaml(path: Path) -> Any:
    import yaml

    try:
        return yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise RecordError(f"{path}: missing; a record folder holds its spec ({SPEC})") from None
    except (OSError, UnicodeDecodeError, RecursionError, yaml.YAMLError) as exc:  # RecursionError: nested too deep
        raise RecordError(f"{path}: unreadable ({str(exc).splitlines()[0]})") from None


def _schema_error(spec: Any) -> str | None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    errors = sorted(validator.iter_errors(spec), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    err = errors[0]
    field = ".".join(str(p) for p in err.absolute_path) or "<root>"
    return f"{field}: {err.message}"


def _checked_name(where: str, name: str, steps: int | None, task: str, max_env_steps: int | None) -> None:
    """A figure soaklab measures for this task, with an env-step count where (and only where) it takes one."""
    if name not in RULE_OF:
        raise RecordError(f"{where}.name: {name!r} is not a figure soaklab measures "
                          f"(known: {', '.join(sorted(RULE_OF))})")
    if name in LEARNING and LEARNING[name][1] is not None and task not in LEARNING[name][1]:
        raise RecordError(f"{where}.name: {name} is logged by {', '.join(LEARNING[name][1])} only, "
                          f"not by task {task}")
    if name in LEARNING and steps is None:
        raise RecordError(f"{where}.at_env_steps: required for the learning figure {name}")
    if name in TIMING and steps is not None:
        raise RecordError(f"{where}.at_env_steps: {name} is a steady-state figure; drop at_env_steps")
    if steps is not None and max_env_steps is not None and steps > max_env_steps:
        raise RecordError(f"{where}.at_env_steps: {steps:,} is past the run's last env step "
                          f"({max_env_steps:,} = algo.max_iterations x algo.num_envs x ranks)")


def _check_finite(where: str, value: Any) -> None:
    """A NaN or infinite band, tolerance or threshold makes every comparison with it vacuous."""
    values = value if isinstance(value, list) else [value]
    if any(isinstance(v, float) and not math.isfinite(v) for v in values):
        raise RecordError(f"{where}: {value}: must be finite (a NaN or infinite bound judges nothing)")


def _figure(where: str, entry: dict[str, Any], task: str, max_env_steps: int | None) -> Figure:
    name, steps = entry["name"], entry.get("at_env_steps")
    _checked_name(where, name, steps, task, max_env_steps)
    rule = entry["rule"]
    if rule != RULE_OF[name]:
        raise RecordError(f"{where}.rule: {rule}: {name} is compared by rule {RULE_OF[name]}")
    band, tolerance = entry.get("band"), entry.get("tolerance")
    for field, value in (("band", band), ("tolerance", tolerance)):
        _check_finite(f"{where}.{field}", value)
    if rule == "ratio":
        if band is None or not band[0] <= 1.0 <= band[1]:
            raise RecordError(f"{where}.band: {band}: expected [low, high] with low <= 1 <= high")
        if tolerance is not None or "relative" in entry:
            raise RecordError(f"{where}.tolerance: rule ratio takes a band, not a tolerance")
    else:
        if band is not None:
            raise RecordError(f"{where}.band: rule bootstrap takes a tolerance, not a band")
        if tolerance is None:
            raise RecordError(f"{where}.tolerance: required by rule bootstrap")
    if entry.get("noisy") and rule != "ratio":
        raise RecordError(f"{where}.noisy: only a ratio figure is judged over the history; drop it")
    return Figure(name, rule, tuple(band) if band else None, tolerance, bool(entry.get("relative", False)), steps,
                  bool(entry.get("noisy", False)))


def _max_env_steps(run: dict[str, Any]) -> int | None:
    overrides = run.get("overrides") or {}
    iterations, envs = overrides.get("algo.max_iterations"), overrides.get("algo.num_envs")
    ranks = overrides.get("training.dp_ranks") or 1
    if all(isinstance(v, int) and not isinstance(v, bool) for v in (iterations, envs, ranks)):
        return iterations * envs * ranks
    return None


def workflow_run_check(root: Path) -> Callable[[str, dict[str, Any]], str | None]:
    """A check of one run entry against the workflow config's own schema (what the DAG validates)
    and its algo, task and sim against the catalogue (the schema lists no names), returning the
    first error as 'field: message' or None."""
    import jsonschema
    import yaml

    schema = yaml.safe_load((root / "workflow" / "schemas" / "config.schema.yaml").read_text())
    validator = jsonschema.Draft202012Validator(schema)

    def check(name: str, run: dict[str, Any]) -> str | None:
        errors = sorted(validator.iter_errors({"runs": {name: run}, "soak_runs": [name]}),
                        key=lambda e: list(e.absolute_path))
        if errors:
            field = [str(p) for p in errors[0].absolute_path][2:]  # drop runs.<name>
            return f"{'.'.join(field) or '<run>'}: {errors[0].message}"
        for field in CATALOGUE.RUN_FIELDS:
            error = CATALOGUE.name_error(field, run[field])
            if error:
                return f"{field}: {error}"
        return None

    return check


def load_record(folder: Path, check_run: Callable[[str, dict[str, Any]], str | None] | None = None) -> Record:
    """The record in `folder`, checked. `check_run(run_name, run)` checks the run entry against the
    workflow config's schema (the DAG's validate(), the CLI's copy of it) and returns an error or None."""
    name = folder.name
    where = f"records/{name}"
    if not NAME.match(name):
        raise RecordError(f"{where}: a record name is lower-case letters, digits and '-'")
    spec = _yaml(folder / SPEC)
    error = _schema_error(spec)
    if error:
        raise RecordError(f"{where}/{SPEC}: {error}")
    run = spec["run"]
    overrides = run.get("overrides") or {}
    if not isinstance(overrides, dict):
        raise RecordError(f"{where}/{SPEC}: run.overrides: expected a mapping")
    for key in SEED_KEYS:
        if key in overrides:
            raise RecordError(f"{where}/{SPEC}: run.overrides.{key}: set by seeds; drop it")
    profile = _profile(where, spec, overrides)
    fixed = {THREADS_KEY: profile.threads} if profile is not None else {}
    runs = []
    for seed in spec["seeds"]:
        entry = copy.deepcopy(run)
        entry["overrides"] = {**overrides, **fixed, **dict.fromkeys(SEED_KEYS, seed)}
        if profile is not None:
            entry["numerics"] = json.loads(profile.to_json())
        runs.append(RecordRun(seed, run_name(name, seed), entry))
    if check_run is not None:
        error = check_run(runs[0].name, runs[0].run)
        if error:
            raise RecordError(f"{where}/{SPEC}: run: {error}")
    exact = spec["compare"].get("exact", spec["machine"] == "cpu")
    if exact and spec["machine"] != "cpu" and overrides.get(DETERMINISTIC_KEY) is not True:
        raise RecordError(f"{where}/{SPEC}: compare.exact: bitwise series hold on the CPU, or on the GPU with "
                          f"run.overrides.{DETERMINISTIC_KEY}: true (docs/determinism.md); else a gpu record "
                          "compares figures")
    task, limit = run.get("task"), _max_env_steps(run)
    figures = tuple(_figure(f"{where}/{SPEC}: compare.figures[{i}]", entry, task, limit)
                    for i, entry in enumerate(spec["compare"].get("figures") or []))
    keys = [f.key for f in figures]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise RecordError(f"{where}/{SPEC}: compare.figures: {dup} is listed twice")
    if not exact and not figures:
        raise RecordError(f"{where}/{SPEC}: compare: nothing to compare (no figures and exact is off)")
    thresholds = []
    for i, entry in enumerate(spec.get("thresholds") or []):
        at = f"{where}/{SPEC}: thresholds[{i}]"
        _checked_name(at, entry["name"], entry.get("at_env_steps"), task, limit)
        figure = Figure(entry["name"], RULE_OF[entry["name"]], at_env_steps=entry.get("at_env_steps"))
        if figure.rule != "bootstrap":  # a threshold says what a run learned; a timing is judged by a band
            raise RecordError(f"{at}: {entry['name']} is a timing, not a learning figure; a threshold takes one "
                              f"of {', '.join(LEARNING)}")
        if entry.get("min") is None and entry.get("max") is None:
            raise RecordError(f"{at}: give min or max")
        for bound in ("min", "max"):
            _check_finite(f"{at}.{bound}", entry.get(bound))
        if entry.get("min") is not None and entry.get("max") is not None and entry["min"] > entry["max"]:
            raise RecordError(f"{at}: min {entry['min']} > max {entry['max']}: no value meets it")
        thresholds.append(Threshold(figure, entry.get("min"), entry.get("max")))
    ci = bool(spec.get("ci", False))
    if ci and spec["machine"] != "cpu":
        raise RecordError(f"{where}/{SPEC}: ci: CI has no GPU; only a cpu record can be reproduced by CI")
    return Record(name, folder, spec["description"], spec["machine"], exact, tuple(runs), figures, tuple(thresholds),
                  ci, profile)


def _profile(where: str, spec: dict[str, Any], overrides: dict[str, Any]) -> Any:
    """The spec's numerics profile: required by a bitwise cpu record (the bits are the profile's, on
    any host that can run it), refused on a gpu record (its arithmetic is the GPU's)."""
    value = spec.get("numerics")
    exact = spec["compare"].get("exact", spec["machine"] == "cpu")
    if value is None:
        if spec["machine"] == "cpu" and exact:
            raise RecordError(f"{where}/{SPEC}: numerics: required by a bitwise cpu record (cpu_capability, "
                              "threads, task_terms; docs/records.md)")
        return None
    if spec["machine"] != "cpu":
        raise RecordError(f"{where}/{SPEC}: numerics: a gpu record's arithmetic is the GPU's; drop it")
    if THREADS_KEY in overrides:
        raise RecordError(f"{where}/{SPEC}: run.overrides.{THREADS_KEY}: set by numerics.threads; drop it")
    try:
        return numerics.parse_profile(f"{where}/{SPEC}: numerics", value)
    except numerics.ProfileError as exc:
        raise RecordError(str(exc)) from None


def load_records(root: Path, check_run: Callable[[str, dict[str, Any]], str | None] | None = None
                 ) -> dict[str, Record]:
    """Every record under `root` (records/), by name; none when the folder does not exist."""
    return {folder.name: load_record(folder, check_run) for folder in record_folders(root)}


def record_folders(root: Path) -> list[Path]:
    """The folder of every record under `root` (records/), in name order; none when it does not exist."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))


def ci_records(records: dict[str, Record]) -> list[str]:
    """The records CI reproduces on every run (`ci: true`), in name order."""
    return [name for name, record in records.items() if record.ci]


def selected(records: dict[str, Record], asked: Any) -> list[str]:
    """The records a reproduce builds: `asked` (a name, or names separated by commas), else every
    cpu record (the ones any machine of the record's kind, CI's included, can rerun)."""
    if asked is None or asked == "":
        return [name for name, record in records.items() if record.machine == "cpu"]
    names = [n.strip() for n in str(asked).split(",") if n.strip()]
    for name in names:
        if name not in records:
            raise RecordError(f"reproduce={asked}: no record {name!r} under records/ "
                              f"(records: {', '.join(records) or 'none'})")
    return names
