"""The import graph: no package cycles, no module cycles inside a package, the soak monitor and the
configuration never import the runtime, and the settings contract is a leaf; and no code outside the
catalogue and sim/ tells backends apart by name (docs/architecture.md)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

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
    # The Learner's loop reads as the iteration's steps: each part's work lives in the part.
    loop = next(node for node in ast.walk(ast.parse((PKG / "rl" / "runner.py").read_text()))
                if isinstance(node, ast.FunctionDef) and node.name == "_loop")
    assert loop.end_lineno - loop.lineno + 1 < 40, "Learner._loop: keep it the iteration's steps"
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
    the run config schema takes its enums from it (its file lists no name), and the Snakefile's sim
    wildcard and the owner YAML tree agree with it."""
    import json

    from soaklab.catalogue import ALGORITHMS, BACKENDS, TASKS
    from soaklab.config.owners import available_algos, available_sims, available_tasks
    from soaklab.schemas import load_schema

    in_file = json.loads((PKG / "schemas" / "run_config.schema.json").read_text())["properties"]
    assert not any("enum" in in_file[key] for key in ("algo", "task", "sim")), "the catalogue's names only"
    loaded = load_schema("run_config")["properties"]
    assert loaded["algo"]["enum"] == list(ALGORITHMS) and loaded["sim"]["enum"] == list(BACKENDS)
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
    assert not (root / "_shared" / "task").exists()  # a task's defaults live in its folder
    for task in TASKS.values():  # each built-in task's folder holds the defaults its entry names
        if task.builder.startswith("soaklab.tasks."):
            folder = PKG.joinpath(*task.builder.split(":")[0].split(".")[1:]).parent
            assert task.defaults == str(folder / "defaults.yaml") and (folder / "defaults.yaml").is_file(), task.name
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
    """Each built-in reference loads as what resolution requires of a plug-in's (a class with a
    callable `build` for a stepper, a callable otherwise)."""
    from soaklab.catalogue import RUN_FIELDS, RUN_REFERENCES, TASKS, reference_error

    errors = {(entry.name, field): reference_error(getattr(entry, field), field)
              for run_field, fields in RUN_REFERENCES.items() for entry in RUN_FIELDS[run_field].values()
              for field in fields}
    errors |= {(task.name, field): reference_error(getattr(task, field), field)
               for task in TASKS.values() for field in ("resolve", "contract") if getattr(task, field) is not None}
    assert {key: error for key, error in errors.items() if error} == {}
    assert len(errors) == 2 * 2 + 2 + 2 + 1 + 2


# The rooms that may compare a backend's name: the catalogue declares it, sim/ holds the backends.
# Everything else reads the entry's facts (stepper, placement, versions).
NAME_ROOMS = ("catalogue", "sim")
COMPARISONS = (ast.Eq, ast.NotEq, ast.Is, ast.IsNot, ast.In, ast.NotIn)


def name_dispatch(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """(line, code) of each place `tree` tells backends apart by name: a comparison (==, !=, is, in)
    with a literal name or a literal tuple, list or set holding one; a dict literal keyed by names
    only (a dispatch table); a `case "name":`. A variable bound to a name, or to a tuple, list or set
    of names only, counts as the literal."""
    def named(node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and node.value in names

    aliases = {target.id for node in ast.walk(tree) if isinstance(node, (ast.Assign, ast.AnnAssign))
               and node.value is not None
               and (named(node.value) or (isinstance(node.value, (ast.Tuple, ast.List, ast.Set)) and node.value.elts
                                          and all(named(e) for e in node.value.elts)))
               for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
               if isinstance(target, ast.Name)}

    def holds_name(node: ast.AST) -> bool:
        if named(node) or (isinstance(node, ast.Name) and node.id in aliases):
            return True
        return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(named(e) for e in node.elts)

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            hit = any(isinstance(op, COMPARISONS) for op in node.ops) and any(
                holds_name(side) for side in (node.left, *node.comparators))
        elif isinstance(node, ast.Dict):
            hit = bool(node.keys) and all(key is not None and named(key) for key in node.keys)
        else:
            hit = isinstance(node, ast.MatchValue) and named(node.value)
        if hit:
            found.append((node.lineno, ast.unparse(node)))
    return found


def workflow_python(path: Path) -> tuple[ast.AST, dict[int, int]]:
    """A Snakefile or rule file as the Python Snakemake runs (parsed by Snakemake's own parser), and
    the map from that code's lines back to the file's."""
    from types import SimpleNamespace

    from snakemake import parser

    class Source:
        def get_path_or_uri(self, secret_free: bool = True) -> str:
            return str(path)

    linemap: dict[int, int] = {}
    workflow = SimpleNamespace(sourcecache=SimpleNamespace(open=lambda source: path.open()))
    code, _ = parser.parse(Source(), workflow, linemap)
    return ast.parse(code), linemap


def backend_name_dispatch() -> list[str]:
    """'file:line: code' of each backend-name comparison outside NAME_ROOMS, in the package (bench/
    included) and the workflow (the Snakefile and its rule files)."""
    from soaklab.catalogue import BACKENDS

    names = set(BACKENDS)
    found = []
    for path in sorted(PKG.rglob("*.py")):
        if room(path) not in NAME_ROOMS:
            found += [f"{path.relative_to(REPO)}:{line}: {code}"
                      for line, code in name_dispatch(ast.parse(path.read_text()), names)]
    for path in [REPO / "Snakefile", *sorted((REPO / "workflow").rglob("*.smk"))]:
        tree, linemap = workflow_python(path)
        found += [f"{path.relative_to(REPO)}:{linemap.get(line, line)}: {code}"
                  for line, code in name_dispatch(tree, names)]
    return found


def test_no_code_outside_the_catalogue_and_sim_compares_a_backends_name():
    """A new backend is its module under sim/ and its catalogue entry: tasks, evaluation, the DAG's
    GPU reservation, host info and records read the entry's stepper, placement and versions, never
    its name (docs/architecture.md, "How to add a simulator backend")."""
    offenders = backend_name_dispatch()
    assert offenders == [], "compares a backend's name; read its catalogue entry instead:\n" + "\n".join(offenders)


@pytest.mark.parametrize(("code", "line"), [
    ('if sim == "mjwarp":\n    pass\n', 1),
    ('ok = "mujoco" != run["sim"]\n', 1),
    ('gpu = sim in ("cuda", "mjwarp")\n', 1),
    ('GPU_SIMS = {"mjwarp"}\nuse = sim not in GPU_SIMS\n', 2),
    ('WARP = "mjwarp"\nuse = sim is WARP\n', 2),
    ('x = 1\nPROBES = {"mujoco": f, "mjwarp": g}\n', 2),
    ('match sim:\n    case "mjwarp":\n        pass\n', 2),
])
def test_the_name_check_finds_each_form_of_dispatch(code, line):
    """The check can fail: each form is found once, at its line."""
    assert [found for found, _ in name_dispatch(ast.parse(code), {"mujoco", "mjwarp"})] == [line]


def test_the_name_check_passes_what_reads_the_entry():
    """Reading the catalogue's facts, defaults, versions keyed among other packages and messages are
    not dispatch by name."""
    code = ('use = BACKENDS[sim].placement == DEVICE_RESIDENT\n'
            'def play(sim: str = "mujoco") -> None: ...\n'
            'found = {"python": "3.11", "mujoco": "3.3"}\n'
            'raise ValueError(f"sim {sim}: evaluate with --sim mujoco")\n')
    assert name_dispatch(ast.parse(code), {"mujoco", "mjwarp"}) == []


# What `soaklab deploy-check` may import (docs/export.md): the file's own contract and plain MuJoCo,
# never a task's code, torch or the runtime, so what it reproduces another program can reproduce.
DEPLOY_THIRD_PARTY = {"numpy", "mujoco", "onnx", "onnxruntime"}
DEPLOY_SOAKLAB = ("soaklab.errors", "soaklab.files.jsonfiles", "soaklab.schemas", "soaklab.deploy")


def test_the_deployment_check_imports_no_task_code():
    paths = list((PKG / "deploy").rglob("*.py"))
    assert len(paths) >= 4
    for path in paths:
        names = imports_of(path)
        tops = {name.split(".")[0] for name in names} - {"__future__", "soaklab"}
        assert tops <= sys.stdlib_module_names | DEPLOY_THIRD_PARTY, (path, sorted(tops - sys.stdlib_module_names))
        ours = {n for n in names if n.startswith("soaklab")}
        assert all(n.startswith(DEPLOY_SOAKLAB) for n in ours), (path, sorted(ours))


def test_the_catalogue_is_standard_library_only():
    path = PKG / "catalogue" / "__init__.py"
    tops = {name.split(".")[0] for name in imports_of(path)} - {"__future__"}
    assert tops <= sys.stdlib_module_names, sorted(tops - sys.stdlib_module_names)
    assert "standard library" in (ast.get_docstring(ast.parse(path.read_text())) or "").lower()


# bench/ holds what `soaklab bench` runs and what the drivers outside the package share (issue 66);
# a driver run once for a visit lives beside its evidence (benchmarks/) or with the GPU scripts.
BENCH_MAX_LINES = 1200


def test_bench_keeps_what_soaklab_bench_runs_and_no_driver():
    modules = sorted((PKG / "bench").rglob("*.py"))
    lines = sum(len(path.read_text().splitlines()) for path in modules)
    assert lines <= BENCH_MAX_LINES, f"src/soaklab/bench/ has {lines} lines (at most {BENCH_MAX_LINES})"
    drivers = [path.name for path in modules if "__main__" in path.read_text()]
    assert not drivers, f"{drivers}: a driver run as a script belongs beside its evidence, not in the package"
