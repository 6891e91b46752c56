"""The import graph: no package cycles, no module cycles inside a package, the soak monitor and the
configuration never import the runtime, and the settings contract is a leaf (docs/architecture.md)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from tests.conftest import REPO

PKG = REPO / "src" / "soaklab"
# Packages that describe, check or observe a run: none of them may import the runtime (soaklab.rl).
NO_RUNTIME = ("soak", "contract", "config", "metrics", "outcomes")
# The package root holds the entry points and the error types; every other module lives in a family.
ROOT_MODULES = {"__init__", "__main__", "errors"}
STANDALONE_LOADER = REPO / "workflow" / "rules" / "common.smk"
# What a module Snakemake loads by path may import beside the standard library: Snakemake's own
# dependencies, present wherever the workflow runs.
SNAKEMAKE_DEPENDENCIES = {"yaml", "jsonschema"}
# The runtime's largest module (docs/architecture.md, "The learner in parts"): what the learner gains
# goes to a part of its own, not into the runner.
RL_MAX_LINES = 350


def room(path: Path) -> str:
    """A module's room: its subpackage, or its own name for a top-level module."""
    rel = path.relative_to(PKG)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def imports_of(path: Path) -> set[str]:
    """Absolute names of everything a module imports, lazy imports inside functions included."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import"
            names.add(node.module or "")
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def room_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in PKG.rglob("*.py"):
        src = room(path)
        graph.setdefault(src, set())
        for name in imports_of(path):
            parts = name.split(".")
            if parts[0] == "soaklab" and len(parts) > 1 and parts[1] != src:
                target = PKG / parts[1]
                if target.is_dir() or target.with_suffix(".py").is_file():
                    graph[src].add(parts[1])
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.parts[-1] == "__init__" else rel.parts
    return ".".join(parts)


def module_graph() -> dict[str, set[str]]:
    """Module -> the modules of its own package it imports (lazy and TYPE_CHECKING imports included:
    each is a dependency a reader must follow)."""
    modules = {module_name(path): path for path in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name.rsplit(".", 1)[0]
        graph[name] = set()
        for imported in imports_of(path):
            parts = imported.split(".")
            target = next((".".join(parts[:i]) for i in range(len(parts), 1, -1) if ".".join(parts[:i]) in modules),
                          None)
            if target and target != name and target.rsplit(".", 1)[0] == package:
                graph[name].add(target)
    return graph


def test_no_module_cycle_inside_a_package():
    graph = module_graph()
    assert "soaklab.rl.runner" in graph["soaklab.rl.train"], "the graph sees imports inside a package"
    assert find_cycle(graph) is None


def test_no_module_of_the_runtime_exceeds_its_size_and_no_part_imports_the_learner():
    """Every module under rl/ (agents/ included) holds at most RL_MAX_LINES lines, and the learner's
    parts never import the runner that holds them: rl.train alone does, to start a Learner."""
    paths = list((PKG / "rl").rglob("*.py"))
    sizes = {path.relative_to(PKG).as_posix(): len(path.read_text().splitlines()) for path in paths}
    assert "rl/runner.py" in sizes and "rl/agents/common.py" in sizes, "the walk reads rl/ and rl/agents/"
    assert {name: n for name, n in sizes.items() if n > RL_MAX_LINES} == {}
    graph = module_graph()
    importers = {name for name, targets in graph.items() if "soaklab.rl.runner" in targets}
    assert importers == {"soaklab.rl.train"}


def test_no_package_cycle():
    assert find_cycle(room_graph()) is None


def test_the_observers_never_import_the_runtime():
    graph = room_graph()
    offenders = {r: sorted(graph[r]) for r in NO_RUNTIME if "rl" in graph[r]}
    assert offenders == {}


def test_the_settings_contract_is_a_leaf():
    """contract/ imports neither the tasks nor torch: a pure function of values and a host
    description (and the catalogue's plain facts)."""
    paths = list((PKG / "contract").rglob("*.py"))
    assert paths
    for path in paths:
        names = imports_of(path)
        assert not {n for n in names if n == "torch" or n.startswith(("torch.", "soaklab.tasks"))}, path
        ours = {n for n in names if n.startswith("soaklab.")}
        # the catalogue is standard library only (test_the_catalogue_is_standard_library_only)
        allowed = ("soaklab.errors", "soaklab.contract", "soaklab.catalogue")
        assert all(n.startswith(allowed) for n in ours), (path, ours)


def test_the_package_root_shows_its_families():
    assert {p.stem for p in PKG.glob("*.py")} == ROOT_MODULES


def standalone_modules() -> list[Path]:
    """Every module the Snakefile loads by path (`_standalone("...")` in common.smk)."""
    found = re.findall(r'_standalone\("([^"]+)"\)', STANDALONE_LOADER.read_text())
    return [PKG / f"{name}.py" for name in found]


def test_what_snakemake_loads_by_path_imports_the_standard_library_only():
    """The DAG plans before (and without) importing soaklab: a module it loads by path may import
    nothing but the standard library (and Snakemake's own dependencies), never soaklab, and says so
    where a reader meets it, in its docstring."""
    modules = standalone_modules()
    assert {p.relative_to(PKG).as_posix() for p in modules} >= {"dag/sweeps.py", "dag/codedeps.py",
                                                                 "records/plan.py"}
    for path in modules:
        tops = {name.split(".")[0] for name in imports_of(path)} - {"__future__"}
        allowed = sys.stdlib_module_names | SNAKEMAKE_DEPENDENCIES
        assert tops <= allowed, (path, sorted(tops - allowed))
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        assert "standard library" in " ".join(doc.split()).lower(), f"{path}: its docstring must state the rule"


def test_the_standalone_check_can_fail(tmp_path):
    """A module importing a third-party package is caught by the same reading."""
    bad = tmp_path / "bad.py"
    bad.write_text('"""Standard library only."""\nimport yaml\nfrom soaklab.errors import InvalidInput\n')
    tops = {name.split(".")[0] for name in imports_of(bad)}
    assert not tops <= sys.stdlib_module_names | SNAKEMAKE_DEPENDENCIES


def test_the_cycle_finder_finds_one():
    """The check can fail: a made-up graph with a cycle is reported."""
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_every_name_of_the_catalogue_is_the_one_the_schemas_the_snakefile_and_the_owner_tree_use():
    """The catalogue (soaklab.catalogue) is the one place algorithms, tasks and backends are declared:
    the run config schema's enums, the Snakefile's sim wildcard and the owner YAML tree agree with it."""
    import json

    from soaklab.catalogue import ALGORITHMS, BACKENDS, TASKS
    from soaklab.config.owners import available_algos, available_sims, available_tasks

    schema = json.loads((PKG / "schemas" / "run_config.schema.json").read_text())
    enums = {key: set(value["enum"]) for key, value in schema["properties"].items()
             if key in ("algo", "task", "sim") and "enum" in value}
    assert enums["algo"] == set(ALGORITHMS) and enums["sim"] == set(BACKENDS)
    assert enums.get("task", set(TASKS)) == set(TASKS)
    # The Snakefile's sim wildcard is the catalogue's backends, read through common.smk.
    assert 'sim="|".join(SIMS)' in (REPO / "Snakefile").read_text()
    assert "SIMS = tuple(catalogue.BACKENDS)" in STANDALONE_LOADER.read_text()
    # The owners are the catalogue's pairings: any algorithm, any task, each backend the task steps on.
    assert set(available_algos()) == set(ALGORITHMS)
    for algo in ALGORITHMS:
        assert set(available_tasks(algo)) == set(TASKS), algo
        for name, task in TASKS.items():
            assert set(available_sims(algo, name)) == set(task.backends), (algo, name)
    for task in TASKS.values():
        assert set(task.backends) <= set(BACKENDS), task.name
    # The owner tree is optional per pairing, but never stale: every file names a catalogue owner.
    root = PKG / "config" / "defaults"
    for path in root.glob("*/task/*/*.yaml"):
        algo, _, task, sim = path.relative_to(root).with_suffix("").parts
        assert algo in ALGORITHMS and task in TASKS, path
        assert sim == "base" or sim in TASKS[task].backends, path
    assert {p.stem for p in (root / "_shared" / "task").glob("*.yaml")} <= set(TASKS)
    assert {p.parent.name for p in root.glob("*/config.yaml")} - {"_shared"} <= set(ALGORITHMS)


def test_the_workflow_schema_lists_no_name_of_the_catalogue():
    """The workflow config's algo and sim are the catalogue's, installed plug-ins included: the schema
    takes any name and the DAG checks each against the catalogue when it loads (common.smk), so no name
    is listed by hand, where a plug-in's could never be."""
    import json

    import yaml

    from soaklab.catalogue import ALGORITHMS, BACKENDS, TASKS

    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    # every string of the schema (enums, consts, defaults, keys) as JSON: no name of the catalogue among them
    strings = json.dumps(schema)
    assert [name for name in (*ALGORITHMS, *TASKS, *BACKENDS) if json.dumps(name) in strings] == []
    assert all(set(schema["$defs"][field]) == {"type", "minLength"} for field in ("algo", "task", "sim"))
    assert "catalogue.name_error(field, run[field])" in STANDALONE_LOADER.read_text()


def test_every_reference_of_the_catalogue_loads():
    from soaklab.catalogue import ALGORITHMS, TASKS, load

    for algo in ALGORITHMS.values():
        assert callable(load(algo.config)) and callable(load(algo.agent)), algo.name
    for task in TASKS.values():
        assert callable(load(task.builder)), task.name


def test_the_catalogue_is_standard_library_only():
    path = PKG / "catalogue" / "__init__.py"
    tops = {name.split(".")[0] for name in imports_of(path)} - {"__future__"}
    assert tops <= sys.stdlib_module_names, sorted(tops - sys.stdlib_module_names)
    assert "standard library" in (ast.get_docstring(ast.parse(path.read_text())) or "").lower()
