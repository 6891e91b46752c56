"""The validation inventory: every configuration soaklab could run, and the evidence of each
(docs/support-matrix.md).

A configuration is one algo x task x sim x device x ranks. The evidence comes from the repository
alone, so that the matrix generated from it is the same on every machine:

- configured: the configuration resolved now, against the settings contract, on the reference host
  of its device (REFERENCE_HOST), or the one line that refuses it;
- tested: the tests marked `@pytest.mark.covers("algo/task/sim/device/ranks")` (tests/conftest.py
  fails a marked test whose runs did not train that configuration, so a marker cannot claim what
  its test does not do), and the records CI reproduces on every run (`ci: true`; record ci-dag is
  the CI DAG's run, .test/config/config.yaml over config/config.yaml);
- records: every record of the configuration, with the artifacts of record of each machine kind and
  their kept reproduction (records/<name>/machines/<kind>/reproduced.json, written by
  `soaklab record keep`).

A record file is anyone's to edit. A spec that cannot be loaded, or a JSON file of a machine kind's
artifacts that soaklab.files.jsonfiles refuses (too large, nested too deep, a key twice, not JSON), is
refused for its record (or that machine kind) only: the line naming it is the generator's error, and
every other record is judged as before.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import read_json
from soaklab.records.plan import (
    RUNS,
    SNAPSHOT,
    Record,
    RecordError,
    load_record,
    record_folders,
    workflow_run_check,
)
from soaklab.records.store import REPRODUCED

DEVICES = ("cpu", "cuda")
RANKS = (1, 2, 4, 8)
COVERS = "covers"
GIB = 1 << 30
# The host a configuration is resolved for, per rank: the GPU machine's shape (16 cores, 128 GiB, one
# H200 with 139 GiB free). Named here, not probed, so that no figure of this machine enters the matrix.
CORES_PER_RANK = 16
REFERENCE_MEMORY = {"mem_available_bytes": 128 * GIB, "shm_free_bytes": 64 * GIB}
GPU_FREE_BYTES = 139 * GIB


@dataclass(frozen=True, order=True)
class Combination:
    algo: str
    task: str
    sim: str
    device: str  # cpu | cuda: the learner's device
    ranks: int

    @property
    def key(self) -> str:
        return f"{self.algo}/{self.task}/{self.sim}/{self.device}/{self.ranks}"

    @classmethod
    def parse(cls, key: str) -> Combination:
        parts = key.split("/")
        if len(parts) != 5 or parts[3] not in DEVICES or not parts[4].isdigit():
            raise ValueError(f"{key!r}: a configuration is 'algo/task/sim/device/ranks' "
                             f"(device {' or '.join(DEVICES)}, ranks an integer)")
        return cls(parts[0], parts[1], parts[2], parts[3], int(parts[4]))


@dataclass(frozen=True)
class Test:
    node: str  # tests/<path>::<name>
    gpu: bool  # marked gpu: runs on the GPU machine (scripts/gpu/gpu_tests.sh); CI skips it


@dataclass(frozen=True)
class Evidence:
    combination: Combination
    refusal: str | None  # None: it resolves
    tests: tuple[Test, ...]
    ci_runs: tuple[str, ...]  # the records CI reproduces (the CI DAG's run among them)
    records: tuple[Record, ...]


def owners(root: Path) -> list[tuple[str, str, str]]:
    """(algo, task, sim) of every owner config under src/soaklab/config/defaults."""
    conf = root / "src" / "soaklab" / "config" / "defaults"
    return sorted((p.parts[-4], p.parts[-2], p.stem) for p in conf.glob("*/task/*/*.yaml")
                  if not p.parts[-4].startswith("_") and p.stem != "base")


def combinations(root: Path) -> list[Combination]:
    return [Combination(a, t, s, d, r) for a, t, s in owners(root) for d in DEVICES for r in RANKS]


def reference_host(combination: Combination) -> Any:
    from soaklab.contract.devices import HostCapabilities

    gpus = combination.ranks if combination.device == "cuda" else 0
    return HostCapabilities(cuda_device_count=gpus, cuda_free_bytes=(GPU_FREE_BYTES,) * gpus,
                            cpu_ids=tuple(range(CORES_PER_RANK * combination.ranks)),
                            source="reference host (soaklab.support.inventory)", **REFERENCE_MEMORY)


def refusal(combination: Combination) -> str | None:
    """None when the configuration resolves on its reference host, else the line that refuses it."""
    from soaklab.config.compose import compose
    from soaklab.config.run_config import resolve_run_config
    from soaklab.errors import InvalidInput

    overrides = [f"training.device={combination.device}", f"training.dp_ranks={combination.ranks}"]
    try:
        composed = compose(combination.algo, combination.task, combination.sim, overrides)
        resolve_run_config(composed, reference_host(combination), False, None)
    except InvalidInput as exc:
        return str(exc)
    return None


def _covers(decorator: ast.expr) -> str | None:
    """The configuration of a `pytest.mark.covers("...")` decorator, else None."""
    if (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)
            and decorator.func.attr == COVERS and decorator.args
            and isinstance(decorator.args[0], ast.Constant) and isinstance(decorator.args[0].value, str)):
        return decorator.args[0].value
    return None


def _is_gpu(decorator: ast.expr) -> bool:
    return isinstance(decorator, ast.Attribute) and decorator.attr == "gpu"


def marked_tests(root: Path) -> dict[str, list[Test]]:
    """Configuration key -> the tests marked as covering it (read from the source, not run)."""
    found: dict[str, list[Test]] = {}
    for path in sorted((root / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text(), str(path))
        module_gpu = any(isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark"
                                                              for t in node.targets)
                         and any(_is_gpu(part) for part in ast.walk(node.value)) for node in tree.body)
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            gpu = module_gpu or any(_is_gpu(d) for d in node.decorator_list)
            # Marks of parametrized cases (pytest.param(..., marks=...)) lie inside the decorators.
            keys = [k for d in node.decorator_list for part in ast.walk(d) if (k := _covers(part)) is not None]
            for key in keys:
                Combination.parse(key)  # a malformed marker fails the generator, naming itself
                found.setdefault(key, []).append(Test(f"{path.relative_to(root)}::{node.name}", gpu))
    return found


def _run_combination(run: dict[str, Any]) -> Combination:
    """The configuration a workflow run entry trains on CI's host (no GPU: the learner on the cpu)."""
    overrides = run.get("overrides") or {}
    ranks = overrides.get("training.dp_ranks") or 1
    return Combination(run["algo"], run["task"], run["sim"], "cpu", int(ranks))


def ci_runs(records: dict[str, Record]) -> dict[str, list[str]]:
    """Configuration key -> what CI runs of it: the records it reproduces on every run."""
    found: dict[str, list[str]] = {}
    for record in records.values():
        if record.ci:
            found.setdefault(_run_combination(record.runs[0].run).key, []).append(
                f"record {record.name} (CI reproduces it)")
    return found


def record_combination(record: Record) -> Combination:
    device = "cuda" if record.machine == "gpu" else "cpu"
    return Combination(record.algo, record.task, record.sim, device, record.ranks)


def usable_records(root: Path) -> tuple[dict[str, Record], list[str]]:
    """Every record under records/ whose spec loads, by name, and the line refusing each other one."""
    check = workflow_run_check(root)
    records: dict[str, Record] = {}
    refused: list[str] = []
    for folder in record_folders(root / "records"):
        try:
            records[folder.name] = load_record(folder, check)
        except RecordError as exc:
            refused.append(str(exc))
    return records, refused


def refused_file(artifacts: Path) -> str | None:
    """The line refusing the first JSON file of one machine kind's artifacts that cannot be read
    (soaklab.files.jsonfiles.read_json), or None where every one can."""
    for path in sorted(artifacts.rglob("*.json")):
        try:
            read_json(path)
        except InvalidInput as exc:
            return str(exc)
        except OSError as exc:
            return f"{path}: unreadable ({exc.strerror or exc})"
    return None


def reproduction(artifacts: Path) -> Any:
    """The kept reproduction of one machine kind's artifacts of record, or None where there is none."""
    path = artifacts / REPRODUCED
    return read_json(path) if path.is_file() else None


def snapshots(record: Record, artifacts: Path) -> list[dict[str, Any]]:
    """The snapshot of each seed's run of record in one machine kind's artifacts."""
    return [read_json(artifacts / RUNS / run.label / SNAPSHOT) for run in record.runs]


def inventory(root: Path) -> list[Evidence]:
    """Every configuration with its evidence, in a fixed order."""
    records, _ = usable_records(root)
    tests, ci = marked_tests(root), ci_runs(records)
    by_combination: dict[Combination, list[Record]] = {}
    for record in records.values():
        by_combination.setdefault(record_combination(record), []).append(record)
    known = combinations(root)
    unknown = sorted((set(tests) | set(ci)) - {c.key for c in known})
    if unknown:
        raise ValueError(f"{unknown[0]}: a marked test or CI run names a configuration with no owner config "
                         "under src/soaklab/config/defaults (or a device/ranks the matrix does not list)")
    return [Evidence(c, refusal(c), tuple(tests.get(c.key, ())), tuple(ci.get(c.key, ())),
                     tuple(by_combination.get(c, ()))) for c in known]
