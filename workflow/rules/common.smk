# Helpers shared by the workflow files: the CLI, run arguments and package inputs.

import importlib.util
import json
import math
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

SOAKLAB = f"{shlex.quote(sys.executable)} -m soaklab"
PKG = Path(workflow.basedir) / "src" / "soaklab"

# Keys the DAG sets itself; a run's overrides may not.
DAG_OWNED_KEYS = {"training.log_dir": "the DAG writes each run to results/{run}/train"}


def _standalone(module, name=None):
    """A package module that needs nothing but the standard library (and what Snakemake itself
    imports), loaded by path: the DAG plans before (and without) importing soaklab."""
    spec = importlib.util.spec_from_file_location(
        name or "soaklab_{}".format(module.replace(os.sep, "_")), PKG / f"{module}.py"
    )
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = loaded  # dataclasses look their module up there
    spec.loader.exec_module(loaded)
    return loaded


def _refuse(line):
    """One line and exit 2 before anything runs, as the soaklab command line refuses."""
    print(f"soaklab: error: {line}", file=sys.stderr)
    sys.exit(2)


# The catalogue of algorithms, tasks and simulator backends (soaklab.catalogue), installed plug-ins
# included: the run names, the sim wildcard, the evaluation backends and the record plans read it
# (records/plan.py loads it under the same name, so once). A plug-in that failed to load stops the
# DAG as it stops every soaklab command: no run plans with a catalogue other than the one installed.
catalogue = _standalone("catalogue/__init__", name="soaklab_catalogue")
if catalogue.PLUGIN_ERRORS:
    _refuse(catalogue.PLUGIN_ERRORS[0])
SIMS = tuple(catalogue.BACKENDS)


def _check_run_names():
    """Every run's algo and sim, and every sweep's algo and sim axis, name catalogue entries (the
    workflow schema lists no names). A task is checked where it is resolved, in the run's own branch."""
    for name, run in config["runs"].items():
        for field in ("algo", "sim"):
            error = catalogue.name_error(field, run[field])
            if error:
                _refuse(f"runs.{name}.{field}: {error}")
    for name, sweep in (config.get("sweeps") or {}).items():
        for field in ("algo", "sim"):
            for value in sweep["matrix"].get(field) or ():
                error = catalogue.name_error(field, value)
                if error:
                    _refuse(f"sweeps.{name}.matrix.{field}: {error}")


_check_run_names()


# A float YAML 1.1 left a string (1e-05 in a config file or --config): the float (soaklab.config.yaml11).
as_float_if_exponent = _standalone("config/yaml11").as_float_if_exponent


# Sweeps (soaklab.dag.sweeps): each point of a sweep becomes a run under config["runs"], so every rule
# below treats it as any other run; SWEEPS keeps each sweep's runs and axis values for its summary.
sweeps = _standalone("dag/sweeps")
SWEEPS = sweeps.expand_sweeps(config.get("sweeps") or {}, config["runs"])
for _sweep in SWEEPS.values():
    for _run in _sweep.runs:
        config["runs"][_run.name] = _run.run


# Records (soaklab.records.plan): each seed of each record under records/ is a run like any other
# (rec-<record>-seed<N>); the `reproduce` target compares the records in REPRODUCE with their runs.
# A bad spec, or an unknown record asked for, is one line and exit 2 before anything runs.
records_plan = _standalone("records/plan")
RECORDS_DIR = Path(workflow.basedir) / "records"
try:
    RECORDS = records_plan.load_records(RECORDS_DIR, records_plan.workflow_run_check(Path(workflow.basedir)))
    REPRODUCE = records_plan.selected(RECORDS, config.get("reproduce"))
except records_plan.RecordError as _exc:
    print(f"soaklab: error: {_exc}", file=sys.stderr)
    sys.exit(2)
# record_overrides: a change tried against the records (an A/B of one setting), applied to every
# record run of this invocation; the seeds stay the record's.
RECORD_OVERRIDES = config.get("record_overrides") or {}
for _key in RECORD_OVERRIDES:
    if _key in records_plan.SEED_KEYS:
        print(f"soaklab: error: record_overrides.{_key}: the seeds are the record's (seeds:)", file=sys.stderr)
        sys.exit(2)
for _record in RECORDS.values():
    for _run in _record.runs:
        if _run.name in config["runs"]:
            print(
                f"soaklab: error: runs.{_run.name}: the name belongs to record {_record.name}; rename the run",
                file=sys.stderr,
            )
            sys.exit(2)
        config["runs"][_run.name] = {**_run.run, "overrides": {**_run.run["overrides"], **RECORD_OVERRIDES}}


# W&B (training.loggers with wandb; docs/loggers.md): the trainer reads its run's name, group and tags
# from W&B's own variables, set on the soak: the workflow run's name, its sweep, its record.
SWEEP_OF = {_run.name: _sweep.name for _sweep in SWEEPS.values() for _run in _sweep.runs}
RECORD_OF = {_run.name: _record.name for _record in RECORDS.values() for _run in _record.runs}


def uses_wandb(name):
    return "wandb" in ((config["runs"][name].get("overrides") or {}).get("training.loggers") or [])


def wandb_env_of(wildcards):
    """`VAR=value ...` for the soak's command line: empty for a run without W&B."""
    if not uses_wandb(wildcards.run):
        return ""
    env = {"WANDB_NAME": wildcards.run}
    if wildcards.run in SWEEP_OF:
        env["WANDB_RUN_GROUP"] = SWEEP_OF[wildcards.run]
    if wildcards.run in RECORD_OF:
        env["WANDB_TAGS"] = RECORD_OF[wildcards.run]
    return " ".join(f"{key}={shlex.quote(value)}" for key, value in env.items()) + " "


def _check_runs():
    runs = config["runs"]
    for name in sweeps.RESERVED_RUN_NAMES:
        if name in runs:
            raise ValueError(f"runs.{name}: the name is taken (results/{name} belongs to the DAG); rename the run")
    for name in config["soak_runs"]:
        if name not in runs:
            raise ValueError(f"soak_runs: {name!r} is not defined under runs: (defined: {', '.join(sorted(runs))})")
    for name, run in runs.items():
        for key in run.get("overrides") or {}:
            if key in DAG_OWNED_KEYS:
                raise ValueError(f"runs.{name}.overrides.{key}: not allowed; {DAG_OWNED_KEYS[key]}")


_check_runs()

# The soak runs whose W&B run gets the DAG's verdict (soak target) and the policy's files (play target).
WANDB_SOAK_RUNS = [name for name in config["soak_runs"] if uses_wandb(name)]

# The soak runs the play target also evaluates from the clip's first frame: those of a task that
# follows a clip (the catalogue's tracking tasks, a plug-in's included); the others are exported only.
TRACKING_SOAK_RUNS = [
    name for name in config["soak_runs"] if config["runs"][name]["task"] in catalogue.tracking_tasks()
]


def wandb_played(wildcards):
    """The play target's files of the run: its policy, its video and, a tracking run, its evaluations."""
    files = {"onnx": f"results/{wildcards.run}/policy.onnx", "video": f"results/{wildcards.run}/play.mp4"}
    if wildcards.run in TRACKING_SOAK_RUNS:
        files.update({f"evaluation_{sim}": f"results/{wildcards.run}/evaluation-{sim}.json" for sim in SIMS})
    return files


# Each rule's code inputs: the import closure of the CLI command it runs, read from the source when
# the DAG loads (soaklab.dag.codedeps).
codedeps = _standalone("dag/codedeps")


def code_of(*commands):
    """A stamp of the package files `soaklab <command>` runs (their sha256 sums): editing one of them
    replans the rule, and only the rules whose command runs it."""
    return str(codedeps.code_stamp(commands, Path(".snakemake/soaklab-code"), root=PKG))


def run_of(wildcards):
    return config["runs"][wildcards.run]


def overrides_of(wildcards):
    return run_of(wildcards).get("overrides") or {}


def uses_gpu(wildcards):
    """A GPU run: one on a device-resident backend (its catalogue entry's placement: MuJoCo Warp
    trains on cuda), and any run whose device override says so."""
    device = str(overrides_of(wildcards).get("training.device", ""))
    backend = catalogue.BACKENDS.get(run_of(wildcards)["sim"])  # checked at load (_check_run_names)
    return (backend is not None and backend.placement == catalogue.DEVICE_RESIDENT) or device.startswith("cuda")


def soak_gpus(wildcards):
    """GPUs of a soak job when its run names none: one per data-parallel rank it asks for
    (training.dp_ranks), else one for a GPU run, else none."""
    if not uses_gpu(wildcards):
        return 0
    ranks = overrides_of(wildcards).get("training.dp_ranks")
    # anything but a plain count is resolve_config's to refuse, in the run's own branch
    return ranks if isinstance(ranks, int) and not isinstance(ranks, bool) and ranks >= 1 else 1


def run_args(wildcards):
    """--algo/--task/--sim and the run's overrides as KEY=VALUE, VALUE as JSON (a YAML subset)
    so that types survive the shell: the string '2' stays a string."""
    run = run_of(wildcards)
    args = ["--algo", run["algo"], "--task", run["task"], "--sim", run["sim"]]
    for key, value in (run.get("overrides") or {}).items():
        # Snakemake read the config as YAML 1.1, which leaves 1e-05 a string: the float it means
        args.append(f"{key}={json.dumps(as_float_if_exponent(value))}")
    return " ".join(shlex.quote(a) for a in args)


def _assets_flags():
    assets = config.get("assets") or {}
    flags = []
    if assets.get("source"):
        flags += ["--source", assets["source"]]
    if assets.get("clip"):
        flags += ["--clip", assets["clip"]]
    if assets.get("clip_wheel"):
        flags += ["--clip-wheel", assets["clip_wheel"]]
    if assets.get("motion"):
        flags += ["--motion", assets["motion"]]
    return " ".join(shlex.quote(f) for f in flags)


def _soak_flags(wildcards):
    flags = []
    for key, value in run_of(wildcards)["soak"].items():  # the config schema requires every key
        flags += [f"--{key.replace('_', '-')}", str(value)]
    if run_of(wildcards).get("numerics") is not None:  # exported by the monitor before torch loads
        flags += ["--numerics", json.dumps(run_of(wildcards)["numerics"], sort_keys=True)]
    return " ".join(shlex.quote(f) for f in flags)


# What every step but the soak asks a scheduler for (a cluster executor reads its threads and these):
# one core, 2 GB and 15 minutes cover the assets pull, config resolution, the MPS record, metric
# extraction from a long soak's event file, validation and the sweep table. Export and playback load
# a policy and MuJoCo: PLAY_RESOURCES. The soak's own come from its run (train_soak).
# What extract_metrics and validate_artifacts derive from a run's soak: one place for their paths.
# A soak run again removes them first, so a soak that then fails leaves no earlier pass standing
# (docs/soak.md, "No stale pass").
DERIVED = {
    "metrics": "results/{run}/metrics.json",
    "csv": "results/{run}/metrics.csv",
    "plot": "results/{run}/metrics.png",
    "table": "results/{run}/metrics.html",
    "validation": "results/{run}/validation.json",
    "validation_table": "results/{run}/validation.html",
}


def derived_of(wildcards):
    return " ".join(shlex.quote(path.format(run=wildcards.run)) for path in DERIVED.values())


LIGHT_RESOURCES = {"mem_mb": 2000, "runtime": 15}
PLAY_RESOURCES = {"mem_mb": 4000, "runtime": 30}


def soak_runtime_minutes(wildcards):
    """The soak job's default wall-clock limit: an hour, or its minimum soak and start-up budget plus a
    quarter of an hour where that is longer (a scheduler kills a job at its limit)."""
    soak = run_of(wildcards)["soak"]
    return max(60, math.ceil((soak["min_duration_seconds"] + soak["startup_timeout_seconds"]) / 60) + 15)


# Cores of a soak job on a cluster when its run names none (Snakemake has no --cores there).
CLUSTER_SOAK_THREADS = 4


def train_threads(wildcards):
    """The soak's cores: its physics threads (env.num_threads) where set, else resources.threads, else
    every core given to a local Snakemake (--cores), else CLUSTER_SOAK_THREADS on a cluster."""
    given = overrides_of(wildcards).get("env.num_threads") or run_of(wildcards).get("resources", {}).get("threads")
    if given:
        return given
    try:
        return workflow.cores
    except WorkflowError:  # a cluster executor: no --cores
        return CLUSTER_SOAK_THREADS


# Sweeps: the summary's command, and which sweeps and runs this invocation asked for.


def sweep_of(wildcards):
    if wildcards.sweep not in SWEEPS:
        raise ValueError(
            f"sweep {wildcards.sweep!r} is not defined under sweeps: (defined: {', '.join(SWEEPS) or 'none'})"
        )
    return SWEEPS[wildcards.sweep]


def sweep_summary_command(sweep, csv, html, plot):
    """`soaklab sweep-summary` for one sweep: the rule's shell command and the error handler's."""
    plan = shlex.quote(json.dumps(SWEEPS[sweep].plan()))
    return (
        f"{SOAKLAB} sweep-summary --plan {plan} --csv {shlex.quote(str(csv))}"
        f" --html {shlex.quote(str(html))} --plot {shlex.quote(str(plot))}"
    )


def sweep_summary_paths(sweep):
    """The table, page and plot of one sweep (sweep_summary's outputs)."""
    return [f"results/sweeps/{sweep}/summary.{ext}" for ext in ("csv", "html", "png")]


def _target_rules():
    return {rule.name for rule in getattr(workflow.dag, "targetrules", ())}


def targeted_sweeps():
    """The sweeps this invocation asked for: every sweep for the `sweep` target, else those whose
    summary files were named as targets."""
    if "sweep" in _target_rules():
        return list(SWEEPS)
    files = [str(f) for f in getattr(workflow.dag, "targetfiles", ())]
    return [name for name in SWEEPS if any(f.startswith(f"results/sweeps/{name}/") for f in files)]


def targeted_records():
    """The records this invocation reproduces: REPRODUCE for the `reproduce` target, else those whose
    comparison files were named as targets."""
    if "reproduce" in _target_rules():
        return list(REPRODUCE)
    files = [str(f) for f in getattr(workflow.dag, "targetfiles", ())]
    return [name for name in RECORDS if any(f.startswith(f"results/reproduce/{name}/") for f in files)]


def summary_command():
    """`soaklab summary` of the runs this invocation built: the asked-for sweeps' and records' runs,
    and `soak_runs` unless only sweeps or records were asked for; nothing for a bisection (its own
    output names what it found)."""
    if _target_rules() == {"bisect"}:
        return "true"
    asked, records = targeted_sweeps(), targeted_records()
    runs = [run for name in asked for run in SWEEPS[name].run_names]
    runs += [run for name in records for run in RECORDS[name].run_names]
    only_sweeps = (asked or records) and "soak" not in _target_rules()
    if not only_sweeps:
        runs = list(config["soak_runs"]) + runs
    target = ("reproduce" if records and not asked else "sweep") if only_sweeps else "soak"
    return f"{SOAKLAB} summary --target {target} " + " ".join(shlex.quote(r) for r in runs)


def incomplete_command(record):
    """Mark a record's comparison incomplete when this invocation did not write it (onerror): the runs
    or the comparison failed first. The reason names the first run of the record that did not pass."""
    out = Path(f"results/reproduce/{record}/comparison.json")
    if out.is_file() and out.stat().st_mtime >= STARTED:
        return "true"
    stopped = [run for run in RECORDS[record].run_names if not Path(f"results/{run}/validation.json").is_file()]
    reason = (
        f"run {stopped[0]} stopped before validation (logs/{stopped[0]}/)"
        if stopped
        else "the comparison did not finish (logs/reproduce/)"
    )
    return (
        f"{SOAKLAB} record incomplete {shlex.quote(record)} --out {shlex.quote(str(out))}"
        f" --reason {shlex.quote(reason)}"
    )


def record_inputs(wildcards):
    """The reproduced runs' outputs, the spec, and the artifacts of record that exist (a record made
    anew replans the comparison; one never made is refused by the command, naming the fix)."""
    record = RECORDS[wildcards.record]
    files = [str(record.folder / records_plan.SPEC), *map(str, record.artifact_files())]
    for run in record.run_names:
        files += [f"results/{run}/{name}" for name in ("validation.json", "soak.json", "run_config.json")]
        files.append(f"results/{run}/train")
    return files


def _local_cores():
    try:
        return workflow.cores
    except WorkflowError:  # a cluster executor: each commit's reproduction runs on one core here
        return 1


def bisect_args():
    """`record bisect`'s arguments from --config record=NAME good=REV bad=REV (the command refuses a
    missing or unknown one in one line)."""
    args = [
        str(config.get("record", "")),
        "--good",
        str(config.get("good", "")),
        "--bad",
        str(config.get("bad", "")),
        "--cores",
        str(_local_cores()),
        "--out",
        f"results/bisect/{config.get('record', '')}.json",
    ]
    return " ".join(shlex.quote(a) for a in args)
