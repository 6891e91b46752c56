"""Record specs: the records of the repository load, and every malformed spec is one exit-2 line
naming the record and the field, through the real CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from soaklab.records.plan import load_records, run_name, selected, workflow_run_check
from tests.conftest import REPO

GOOD = {
    "description": "a record under test",
    "machine": "cpu",
    "numerics": {"cpu_capability": "avx2", "threads": 2, "task_terms": "inductor"},
    "seeds": [1],
    "run": {"algo": "sac", "task": "g1_motion_tracking", "sim": "mujoco",
            "overrides": {"algo.num_envs": 4, "algo.max_iterations": 10},
            "soak": {"min_duration_seconds": 1, "sample_interval_seconds": 1, "startup_timeout_seconds": 60,
                     "stale_progress_seconds": 60, "post_shutdown_grace_seconds": 1}},
    "compare": {"exact": True, "figures": [{"name": "env_steps_per_s", "rule": "ratio", "band": [0.5, 2.0]}]},
}


def test_the_repository_records_load_and_name_their_runs():
    records = load_records(REPO / "records", workflow_run_check(REPO))
    assert {"ci-dag", "cpu-g1-soak", "gpu-learning"} <= set(records)
    assert records["ci-dag"].run_names == ["rec-ci-dag-seed1"]
    assert records["gpu-learning"].run_names == [run_name("gpu-learning", s) for s in (1, 2, 3)]
    assert records["gpu-learning"].runs[1].run["overrides"]["env.seed"] == 2
    assert set(selected(records, None)) == {n for n, r in records.items() if r.machine == "cpu"}


def _root(tmp_path: Path, spec: dict) -> Path:
    (tmp_path / "workflow").mkdir()
    shutil.copytree(REPO / "workflow" / "schemas", tmp_path / "workflow" / "schemas")
    (tmp_path / "records" / "probe").mkdir(parents=True)
    (tmp_path / "records" / "probe" / "record.yaml").write_text(yaml.safe_dump(spec))
    return tmp_path


def _check(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "soaklab", "record", "check", "--records", str(root / "records")],
                          capture_output=True, text=True, timeout=120)


def test_a_good_spec_checks(tmp_path):
    proc = _check(_root(tmp_path, GOOD))
    assert proc.returncode == 0, proc.stderr
    assert "record probe: ok" in proc.stdout and "no artifacts of record yet" in proc.stdout


def _edit(path: str, value):
    spec = yaml.safe_load(yaml.safe_dump(GOOD))
    node = spec
    keys = path.split("/")
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is None:
        del node[keys[-1]]
    else:
        node[int(keys[-1]) if isinstance(node, list) else keys[-1]] = value
    return spec


@pytest.mark.parametrize(("path", "value", "words"), [
    ("machine", "tpu", "machine"),
    ("seeds", [], "seeds"),
    ("compare/figures/0/name", "fps", "compare.figures[0].name: 'fps' is not a figure"),
    ("compare/figures/0/band", [1.5, 2.0], "compare.figures[0].band"),
    ("compare/figures/0/rule", "bootstrap", "compare.figures[0].rule"),
    ("compare/figures", [{"name": "timeout_fraction", "rule": "bootstrap", "tolerance": 0.1}],
     "compare.figures[0].at_env_steps: required"),
    ("compare/figures", [{"name": "mean_reward", "rule": "bootstrap", "tolerance": 0.1, "at_env_steps": 10_000}],
     "past the run's last env step"),
    ("compare/figures", [{"name": "mean_reward", "rule": "bootstrap", "at_env_steps": 8}],
     "compare.figures[0].tolerance: required"),
    ("run/overrides/env.seed", 3, "run.overrides.env.seed: set by seeds"),
    ("numerics", None, "numerics: required by a bitwise cpu record"),
    ("compare/figures/0/band", [0.5, float("inf")], "compare.figures[0].band: [0.5, inf]: must be finite"),
    ("compare/figures/0/band", [float("nan"), 2.0], "compare.figures[0].band: [nan, 2.0]: must be finite"),
    ("compare/figures", [{"name": "mean_reward", "rule": "bootstrap", "tolerance": float("nan"), "at_env_steps": 8}],
     "compare.figures[0].tolerance: nan: must be finite"),
    ("thresholds", [{"name": "mean_reward", "at_env_steps": 8, "min": float("nan")}],
     "thresholds[0].min: nan: must be finite"),
    ("thresholds", [{"name": "env_steps_per_s", "min": 1.0}],
     "thresholds[0]: env_steps_per_s is a timing, not a learning figure"),
    ("thresholds", [{"name": "mean_reward", "at_env_steps": 8, "min": 2.0, "max": 1.0}],
     "thresholds[0]: min 2.0 > max 1.0: no value meets it"),
    ("compare/figures", [{"name": "mean_reward", "rule": "bootstrap", "tolerance": 0.1, "at_env_steps": 8,
                          "noisy": True}], "compare.figures[0].noisy: only a ratio figure is judged over the history"),
    ("numerics/cpu_capability", "avx1024", "numerics.cpu_capability: 'avx1024' is not an x86-64 capability"),
    ("numerics/cpu_capability", "AVX2", "numerics.cpu_capability: 'AVX2'"),
    ("numerics/threads", 0, "numerics.threads: 0: expected an integer in [1, 256]"),
    ("numerics/threads", "2", "numerics.threads: '2'"),
    ("numerics/threads", 1.5, "numerics.threads: 1.5"),
    ("numerics/task_terms", "jit", "numerics.task_terms: 'jit': expected one of inductor, eager"),
    ("numerics/mkl", "avx2", "numerics.mkl: not a profile setting"),
    ("run/overrides/env.num_threads", 4, "run.overrides.env.num_threads: set by numerics.threads"),
    ("machine", "gpu", "numerics: a gpu record's arithmetic is the GPU's"),
    ("run/soak/min_duration_seconds", -1, "run: soak.min_duration_seconds"),
    ("run/sim", "bullet", "run: sim: 'bullet' is not in the catalogue (one of mujoco, mjwarp;"),
    ("run/algo", "ppo", "run: algo: 'ppo' is not in the catalogue"),
    ("run/task", "walker", "run: task: 'walker' is not in the catalogue"),
    ("description", None, "description"),
])
def test_a_malformed_spec_is_one_line_naming_the_field(tmp_path, path, value, words):
    proc = _check(_root(tmp_path, _edit(path, value)))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "records/probe" in lines[0] and words in lines[0], proc.stderr
    assert proc.stdout == ""


def test_a_gpu_spec_cannot_ask_for_bitwise_series(tmp_path):
    spec = _edit("numerics", None) | {"machine": "gpu"}
    proc = _check(_root(tmp_path, spec))
    assert proc.returncode == 2 and "compare.exact" in proc.stderr


def test_a_tracking_figure_of_a_task_that_logs_none(tmp_path):
    spec = _edit("run/task", "cartpole_swingup")
    spec["compare"]["figures"] = [{"name": "body_pos_error_m", "rule": "bootstrap", "tolerance": 0.1,
                                   "at_env_steps": 8}]
    proc = _check(_root(tmp_path, spec))
    assert proc.returncode == 2 and "not by task cartpole_swingup" in proc.stderr


def test_artifacts_of_record_are_kept_per_machine_kind(tmp_path):
    """A record made on two CPU models holds two sets; a run is compared with its own kind's, and a
    kind the record lacks gets the first set (which the comparison then calls not_comparable)."""
    from soaklab.records import store
    from soaklab.records.plan import machine_slug

    (tmp_path / "workflow").symlink_to(REPO / "workflow")
    shutil.copytree(REPO / "records" / "ci-dag", tmp_path / "records" / "ci-dag")
    record = store.load(tmp_path / "records", "ci-dag")
    committed = record.artifact_sets()
    first = committed[0]
    other = first.parent / machine_slug("cpu: Other CPU(R) x2")
    shutil.copytree(first, other)
    provenance = json.loads((other / "provenance.json").read_text())
    provenance["machine_kind"] = "cpu: Other CPU(R) x2"
    (other / "provenance.json").write_text(json.dumps(provenance))
    assert other.name == "cpu-other-cpu-r-x2"
    assert record.artifact_sets() == sorted([*committed, other])
    assert store.artifacts_for(record, "cpu: Other CPU(R) x2") == other
    assert store.read_recorded(record, "cpu: Other CPU(R) x2")[0]["machine_kind"] == "cpu: Other CPU(R) x2"
    assert store.artifacts_for(record, "cpu: Unknown x2") == record.artifact_sets()[0]


def test_the_ci_record_is_the_ci_dag_run():
    """.ci/run reproduces record ci-dag instead of running the CI DAG (.test/config/config.yaml) a
    second time: the two are one run. The record only pins what a bitwise record must (the seeds,
    and the physics threads that CI's two cores give the DAG run)."""
    from omegaconf import OmegaConf

    records = load_records(REPO / "records", workflow_run_check(REPO))
    assert [n for n, r in records.items() if r.ci] == ["ci-dag"]
    merged = OmegaConf.to_container(OmegaConf.merge(OmegaConf.load(REPO / "config/config.yaml"),
                                                    OmegaConf.load(REPO / ".test/config/config.yaml")))
    dag_run = merged["runs"]["cpu"]
    record_run = records["ci-dag"].runs[0].run
    pinned = {"env.seed", "algo.seed", "env.num_threads"}
    # and the numerics profile its runs carry to the soak (soaklab soak --numerics)
    assert {k: v for k, v in record_run.items() if k not in ("overrides", "numerics")} == {
        k: v for k, v in dag_run.items() if k != "overrides"}
    assert record_run["numerics"] == {"cpu_capability": "avx2", "threads": 2, "task_terms": "inductor"}
    assert {k: v for k, v in record_run["overrides"].items() if k not in pinned} == dag_run["overrides"]
    assert record_run["overrides"]["env.num_threads"] == 2


def test_ci_records_are_listed_and_only_cpu_records_can_be_ci(tmp_path):
    spec = _edit("machine", "cpu") | {"ci": True}
    root = _root(tmp_path, spec)
    listed = subprocess.run([sys.executable, "-m", "soaklab", "record", "list", "--ci", "--records",
                             str(root / "records")], capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and listed.stdout.strip() == "probe", listed.stderr
    gpu = {k: v for k, v in spec.items() if k != "numerics"} | {"machine": "gpu", "compare": {
        "figures": [{"name": "env_steps_per_s", "rule": "ratio", "band": [0.5, 2.0]}]}}
    (root / "records" / "probe" / "record.yaml").write_text(yaml.safe_dump(gpu))
    proc = _check(root)
    assert proc.returncode == 2 and "records/probe/record.yaml: ci: CI has no GPU" in proc.stderr, proc.stderr


def test_a_gpu_record_is_bitwise_only_in_the_deterministic_mode(tmp_path):
    """compare.exact on a gpu record needs run.overrides training.deterministic: true (docs/determinism.md)."""
    import yaml

    from soaklab.records.plan import RecordError, load_record

    spec = {"description": "d", "machine": "gpu", "seeds": [1],
            "run": {"algo": "flashsac", "task": "g1_motion_tracking", "sim": "mjwarp",
                    "overrides": {"algo.num_envs": 1024, "algo.max_iterations": 200}},
            "compare": {"exact": True}}
    folder = tmp_path / "gpu-bits"
    folder.mkdir()
    (folder / "record.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(RecordError, match="training.deterministic: true"):
        load_record(folder)
    spec["run"]["overrides"]["training.deterministic"] = True
    (folder / "record.yaml").write_text(yaml.safe_dump(spec))
    assert load_record(folder).exact is True
