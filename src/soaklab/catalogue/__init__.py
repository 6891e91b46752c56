"""The plug-in points, declared once: every algorithm, task and simulator backend soaklab knows.

Each entry carries plain facts (spaces, reward terms, whether it needs assets, where a backend keeps
its state, which backends a task runs on) and "module:name" references to its typed config and its
builder or stepper, imported only when used. Every dispatch on these names reads this module: the
agent factory, the env builder, the stepper a task steps, the settings contract, the CLI choices,
record plans and compared versions, evaluation, the DAG's GPU reservation; and
tests/test_structure.py holds the JSON Schema enums, the Snakefile and the owner YAML tree to it, and
fails on a backend's name compared anywhere outside this module and soaklab.sim.

Standard library only: the settings contract (a leaf) and the Snakefile (which loads this file by
path before soaklab is importable) read it too. docs/architecture.md, "How to add ...", says which
files a new entry touches.

Plug-ins: an installed distribution adds entries through the `soaklab.catalogue` entry-point group;
each entry point names an iterable of Algorithm, Task and Backend entries (its code lives in the
plug-in, its defaults in the YAML its entry names). They are read once, when this module loads, so a
spawned collector sees the same catalogue as its learner.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, fields, is_dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

PLUGIN_GROUP = "soaklab.catalogue"
# The built-in tasks' folders (src/soaklab/tasks/<folder>/): each keeps its `task:` defaults there.
TASKS_ROOT = Path(__file__).resolve().parent.parent / "tasks"

HOST_BRIDGE = "host_bridge"  # the backend keeps its state in host memory; tensors are a view of it
DEVICE_RESIDENT = "device_resident"  # the backend keeps its state on the GPU (or warp's CPU device)


@dataclass(frozen=True)
class Algorithm:
    name: str
    config: str  # "module:Class": the `algo` section's typed config
    agent: str  # "module:Class": the agent, built with (obs, critic obs, action, envs, config, device)
    # The absolute path of a YAML of its `algo` defaults (the shared keys' values it changes; keys of
    # its own config class); None: config/defaults/<name>/config.yaml where it is, else the shared
    # defaults alone.
    defaults: str | None = None


@dataclass(frozen=True)
class Backend:
    name: str
    # "module:Class": the stepper; every task builds it through soaklab.sim.build_stepper, with
    # Class.build(model, num_envs, decimation, device=..., num_threads=...)
    stepper: str
    placement: str  # HOST_BRIDGE or DEVICE_RESIDENT (soaklab.contract.devices)
    versions: tuple[str, ...]  # the software versions a record of a run on it is compared on
    module: str | None = None  # a Python module it needs beyond the base install (its extra)
    # training.deterministic (docs/determinism.md): None, the backend has no deterministic mode and the
    # setting is refused on it; else the distributions (pip names) and the first version of each whose
    # stepping repeats bit for bit in that mode (empty: it does so as it is, one thread per world).
    deterministic: tuple[tuple[str, str], ...] | None = None
    # the distributions whose exact release soaklab's own part of that mode follows (mjwarp: the sorts
    # it installs into mujoco_warp 4.0.0's contact and constraint hooks, soaklab.sim.mjwarp_sorts)
    deterministic_exact: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Task:
    name: str
    builder: str  # "module:function": (run, EnvSpec, scene, compile_terms) -> BatchedEnv
    actor_obs: int
    critic_obs: int
    action: int
    reward_terms: tuple[str, ...]  # what the env reports per step, in this order
    backends: tuple[str, ...]  # the simulator backends it steps on
    needs_assets: bool  # the G1 model and clips (`soaklab assets pull`) before it resolves
    tracking_metrics: tuple[str, ...] = ()  # per-step measures logged but never rewarded
    tracking: bool = False  # follows a reference clip: motion libraries, first-frame evaluation, tracking figures
    # The absolute path of a YAML defining its `task:` keys (and any shared values it changes), kept
    # in the task's folder; None: no task keys.
    defaults: str | None = None
    # "module:function": the task's own resolution checks, called with plain values (copies of the
    # composed config's mapping and of the asset manifest's record) before anything is built; they
    # raise soaklab.errors.InvalidInput (anything else raised is a refusal naming the check). None:
    # the task has none.
    resolve: str | None = None
    # "module:function": (run, assets record, env) -> the task's half of the policy contract `soaklab
    # export` writes into the ONNX file (docs/export.md); None: the task's policies export without one
    # and `soaklab deploy-check` refuses them.
    contract: str | None = None


ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("sac", "soaklab.contract.sections:AlgoConfig", "soaklab.rl.agents.sac:SACAgent"),
    Algorithm("flashsac", "soaklab.contract.sections:FlashSACConfig", "soaklab.rl.agents.flashsac:FlashSACAgent"),
)}

BACKENDS: dict[str, Backend] = {b.name: b for b in (
    Backend("mujoco", "soaklab.sim.mujoco_cpu:MujocoBackend", HOST_BRIDGE, ("torch", "mujoco"), deterministic=()),
    # opt.deterministic and warp's DeterministicMode appeared in these releases
    Backend("mjwarp", "soaklab.sim.mjwarp:MjwarpBackend", DEVICE_RESIDENT,
            ("python", "torch", "mujoco", "warp", "mujoco_warp"), module="mujoco_warp",
            deterministic=(("warp-lang", "1.19.0"), ("mujoco-warp", "4.0.0")),
            deterministic_exact=(("mujoco-warp", "4.0.0"),)),
)}

TASKS: dict[str, Task] = {t.name: t for t in (
    Task("g1_motion_tracking", "soaklab.tasks.g1_tracking.library:build", actor_obs=160, critic_obs=286, action=29,
         reward_terms=("anchor_pos", "anchor_ori", "body_pos", "body_ori", "body_lin_vel", "body_ang_vel",
                       "action_rate", "joint_limit", "undesired_contacts"),
         backends=("mujoco", "mjwarp"), needs_assets=True,
         # the mean distance of the tracked bodies from the re-anchored reference (m), the mean
         # joint-angle error (rad)
         tracking_metrics=("body_pos_error_m", "joint_pos_error_rad"), tracking=True,
         defaults=str(TASKS_ROOT / "g1_tracking" / "defaults.yaml"), resolve="soaklab.tasks.g1_tracking.resolve:check",
         contract="soaklab.tasks.g1_tracking.contract:policy_contract"),
    # cos/sin of the pole angle, cart position, cart and pole velocity; one force.
    Task("cartpole_swingup", "soaklab.tasks.cartpole.env:build", actor_obs=5, critic_obs=5, action=1,
         reward_terms=("upright", "centered", "control"), backends=("mujoco",), needs_assets=False,
         defaults=str(TASKS_ROOT / "cartpole" / "defaults.yaml"),
         contract="soaklab.tasks.cartpole.contract:policy_contract"),
)}


# One line per installed plug-in that could not be added (it failed to load, or named something
# wrongly). Its entries are left out, and the command line refuses every command while one is listed
# (soaklab.cli.main, exit 2): a run never starts with a catalogue other than the one installed.
PLUGIN_ERRORS: list[str] = []


def _as_entry(entry: Any) -> Algorithm | Task | Backend:
    """`entry` as this module's Algorithm, Task or Backend. The Snakefile and the record plans load
    this file by path, as a second copy of the module beside `soaklab.catalogue`, while a plug-in
    builds its entries from `soaklab.catalogue`'s classes: an entry of either copy is taken, field for
    field; anything else is refused."""
    for kind in (Algorithm, Task, Backend):
        if type(entry) is kind:
            return entry
        if (type(entry).__name__ == kind.__name__ and is_dataclass(entry)
                and {f.name for f in fields(entry)} == {f.name for f in fields(kind)}):
            return kind(**{f.name: getattr(entry, f.name) for f in fields(kind)})
    raise TypeError(f"{entry!r} is not an Algorithm, Task or Backend")


# What an entry's names and references must look like: a name goes into paths, YAML keys, metric
# tags and command lines, so a plug-in's is held to the form every built-in name has.
NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
REFERENCE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
VERSION = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _field_error(entry: Algorithm | Task | Backend, field: str) -> str | None:
    """Why `entry`'s `field` does not hold what the catalogue's code expects there, or None."""
    value = getattr(entry, field)
    if field == "name" or field in ("reward_terms", "tracking_metrics"):
        names = [value] if field == "name" else value
        if field != "name" and (type(value) is not tuple or len(set(value)) != len(value)):
            return "must be a tuple of distinct names"
        if not all(isinstance(name, str) and NAME.match(name) for name in names):
            return f"must be {'a name' if field == 'name' else 'names'} like 'my_task' ({NAME.pattern})"
    elif field in ("config", "agent", "builder", "stepper"):
        if not (isinstance(value, str) and REFERENCE.match(value)):
            return "must be a \"module:name\" reference"
    elif field in ("resolve", "contract"):
        if value is not None and not (isinstance(value, str) and REFERENCE.match(value)):
            return "must be None or a \"module:name\" reference"
    elif field in ("actor_obs", "critic_obs", "action"):
        if type(value) is not int or value <= 0:
            return "must be an int > 0"
    elif field in ("needs_assets", "tracking"):
        if type(value) is not bool:
            return "must be True or False"
    elif field == "defaults":
        # absolute: a plug-in's relative path would be read from wherever the command runs
        if value is not None and not (isinstance(value, str) and Path(value).is_absolute()):
            return "must be None or an absolute path of a YAML"
    elif field == "module":
        if value is not None and not (isinstance(value, str) and MODULE.match(value)):
            return "must be None or a module name"
    elif field == "placement":
        if value not in (HOST_BRIDGE, DEVICE_RESIDENT):
            return f"must be {HOST_BRIDGE!r} or {DEVICE_RESIDENT!r}"
    elif field == "versions":
        if type(value) is not tuple or not all(isinstance(v, str) and VERSION.match(v) for v in value):
            return "must be a tuple of package names"
    elif field == "deterministic_exact":
        if not (type(value) is tuple and all(
                type(p) is tuple and len(p) == 2 and all(isinstance(v, str) and VERSION.match(v) for v in p)
                for p in value)):
            return "must be a tuple of (distribution, version) pairs"
    elif field == "deterministic":
        if value is not None and not (type(value) is tuple and all(
                type(p) is tuple and len(p) == 2 and all(isinstance(v, str) and VERSION.match(v) for v in p)
                for p in value)):
            return "must be None or a tuple of (distribution, minimum version) pairs"
    elif field == "backends":
        if type(value) is not tuple or not value or not all(isinstance(b, str) for b in value):
            return "must be a non-empty tuple of backend names"
    return None


def _entry_error(entry: Algorithm | Task | Backend) -> str | None:
    """The first field of `entry` that holds the wrong thing, in one line naming the entry and field."""
    for field in fields(entry):
        if reason := _field_error(entry, field.name):
            return (f"{type(entry).__name__.lower()} {_shown(entry.name)}: {field.name} {reason}, "
                    f"not {_shown(getattr(entry, field.name))}")
    return None


def _plugin_entries(point: Any, taken: dict[type, set[str]]) -> list[Algorithm | Task | Backend]:
    """A plug-in's entries, checked whole before any is added (a bad one adds none): each field's
    type and form, and no name already in the catalogue (`taken`: the built-ins' and the plug-ins'
    before it) or twice in the plug-in itself."""
    entries = [_as_entry(entry) for entry in point.load()]
    own: dict[type, set[str]] = {Algorithm: set(), Task: set(), Backend: set()}
    for entry in entries:
        if error := _entry_error(entry):
            raise ValueError(error)
        kind = type(entry).__name__.lower()
        if entry.name in taken[type(entry)]:
            raise ValueError(f"{kind} {entry.name!r} is already in the catalogue; choose another name")
        if entry.name in own[type(entry)]:
            raise ValueError(f"{kind} {entry.name!r} is declared twice in this plug-in; keep one")
        own[type(entry)].add(entry.name)
    return entries


def _add_plugins() -> None:
    """Every installed plug-in's entries, into the tables above. A name already taken is refused: a
    plug-in adds to the catalogue, it never replaces what is there. A task's backends must be
    declared, by soaklab or a plug-in, once all are read."""
    tables: dict[type, dict[str, Any]] = {Algorithm: ALGORITHMS, Task: TASKS, Backend: BACKENDS}
    taken = {kind: set(table) for kind, table in tables.items()}
    loaded: list[tuple[Any, list[Algorithm | Task | Backend]]] = []

    def refuse(point: Any, line: str) -> None:
        PLUGIN_ERRORS.append(f"plug-in {point.value} ({PLUGIN_GROUP} entry point {point.name!r}): {line}; "
                             "fix or uninstall it")

    for point in entry_points(group=PLUGIN_GROUP):
        try:
            entries = _plugin_entries(point, taken)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # the plug-in's own code (a sys.exit included): its failure
            refuse(point, f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}")
            continue
        for entry in entries:
            taken[type(entry)].add(entry.name)
        loaded.append((point, entries))
    for point, entries in loaded:
        unknown = [(task.name, backend) for task in entries if isinstance(task, Task)
                   for backend in task.backends if backend not in taken[Backend]]
        if unknown:
            task, backend = unknown[0]
            refuse(point, f"ValueError: task {task!r}: backends names {_shown(backend)}, not a backend of the "
                          f"catalogue (one of {', '.join(sorted(taken[Backend]))})")
            continue
        for entry in entries:
            tables[type(entry)][entry.name] = entry


_add_plugins()


def tracking_tasks() -> tuple[str, ...]:
    return tuple(name for name, task in TASKS.items() if task.tracking)


def compared_versions() -> tuple[str, ...]:
    """Every version a run can be compared on: python, then each backend's `versions` in catalogue
    order, once each (host info records them; a record of a sim it does not know compares them all)."""
    names = ["python"]
    for backend in BACKENDS.values():
        names.extend(name for name in backend.versions if name not in names)
    return tuple(names)


def load(reference: str) -> Any:
    """What a "module:name" reference names, imported now (builders and configs load only when used)."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


# The references of a run's entries that its processes load once they start, by the entry's table:
# each must load as what its caller builds (a class with a callable `build` for a stepper).
RUN_REFERENCES: dict[str, tuple[str, ...]] = {"algo": ("config", "agent"), "task": ("builder",),
                                              "sim": ("stepper",)}


def reference_error(reference: str, field: str) -> str | None:
    """Why the "module:name" `reference` of an entry's `field` does not load as what soaklab calls
    there, or None: imported now, so a plug-in's failure (a `sys.exit` included) is named here
    rather than in a spawned process."""
    try:
        target = load(reference)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the plug-in's own code
        return f"does not load ({type(exc).__name__}: {(str(exc).splitlines() or [''])[0]})"
    if field == "stepper":
        if not (isinstance(target, type) and callable(getattr(target, "build", None))):
            return "is not a class with a callable build"
    elif not callable(target):
        return f"is not callable (a {type(target).__name__})"
    return None


def run_reference_error(algo: str, task: str, sim: str) -> str | None:
    """The first reference of the run's entries (RUN_REFERENCES) that does not load, in one line
    naming the entry, the field, the reference and the fix; None when all do."""
    names = {"algo": algo, "task": task, "sim": sim}
    for run_field, entry_fields in RUN_REFERENCES.items():
        entry = RUN_FIELDS[run_field][names[run_field]]
        for field in entry_fields:
            reference = getattr(entry, field)
            if reason := reference_error(reference, field):
                kind = {"algo": "algorithm", "task": "task", "sim": "backend"}[run_field]
                return (f"{kind} {entry.name}: its {field} {reference} {reason}; "
                        "fix or uninstall the plug-in that declares it")
    return None


def choices(table: dict[str, Any]) -> str:
    """The names of a table, for one-line refusals."""
    return ", ".join(table)


# The workflow config's run fields, by the table that names them.
RUN_FIELDS: dict[str, dict[str, Any]] = {"algo": ALGORITHMS, "task": TASKS, "sim": BACKENDS}


def name_error(field: str, value: Any) -> str | None:
    """Why `value` names no entry of a run field ("algo", "task" or "sim"), or None. The workflow
    config's schema lists no names: the DAG and the record plans check them here, plug-ins included."""
    table = RUN_FIELDS[field]
    if isinstance(value, str) and value in table:
        return None
    return f"{value!r} is not in the catalogue (one of {choices(table)}; a plug-in's names once it is installed)"
