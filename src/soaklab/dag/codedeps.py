"""The package files a CLI command runs: its import closure, read from the source (docs/dag.md).

The workflow declares these as each rule's code inputs, computed when the DAG loads, so editing
any module a rule uses (and only those) replans it. Standard library only, and it imports nothing
of soaklab: the Snakefile loads it by path before the environment is known to be complete.
"""

from __future__ import annotations

import ast
import hashlib
import re
from functools import cache
from pathlib import Path

PACKAGE = "soaklab"
ROOT = Path(__file__).resolve().parent.parent  # the soaklab package
# Files a module reads at run time rather than imports (globs under the package): the owner YAML tree,
# each task's defaults (its catalogue entry names them) and the JSON schemas.
# Only what each reads (YAML, JSON): an editor's swap or backup file beside them is not code.
DATA = {"soaklab.config.compose": ("config/defaults/**/*.yaml", "tasks/*/defaults.yaml"),
        "soaklab.schemas": ("schemas/**/*.json",)}
CLI = "soaklab.cli"
# The catalogue names each entry's code by a "module:name" string, imported when used through these
# loaders: a module that imports one of them can run every module the catalogue names (a train runs
# its agent, task builder and stepper, none of which any module imports by name).
CATALOGUE = "soaklab.catalogue"
CATALOGUE_LOADERS = frozenset({"load", "reference_error", "run_reference_error"})
REFERENCE = re.compile(r"^(soaklab(?:\.\w+)+):\w+$")


def _path(module: str, root: Path) -> Path | None:
    parts = module.split(".")[1:]
    base = root.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every soaklab module named by an import anywhere in the tree (lazy ones inside functions too),
    and CATALOGUE_REFERENCES for a module that imports one of the catalogue's loaders."""
    found: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)  # `from pkg import module`
            if base == CATALOGUE and CATALOGUE_LOADERS & {a.name for a in node.names}:
                found.add(CATALOGUE_REFERENCES)
    return {m for m in found if m == PACKAGE or m.startswith(PACKAGE + ".") or m == CATALOGUE_REFERENCES}


# A stand-in module name in a closure: the modules the catalogue's "module:name" strings name.
CATALOGUE_REFERENCES = "<catalogue references>"


def _referenced(root: Path) -> set[str]:
    """The modules the catalogue's entries name by "module:name" strings (its own file, read here:
    a plug-in's entries live in its own distribution, outside the package these stamps cover)."""
    path = _path(CATALOGUE, root)
    if path is None:
        return set()
    strings = (node.value for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
               if isinstance(node, ast.Constant) and isinstance(node.value, str))
    return {match[1] for value in strings if (match := REFERENCE.match(value))}


@cache
def _source_imports(source: str, filename: str, module: str, is_package: bool) -> frozenset[str]:
    """_imports of one file's source, parsed once per process: every command's closure walks many
    of the same modules, and parsing them again for each was most of a Snakemake start (3 of its 4
    s). Keyed by the source itself, so an edited file is read afresh. The whole file is parsed: a
    reading of its import lines alone was a tenth of the time, and missed imports after a comment
    holding a parenthesis (an adversary's, 2026-12-07), so a rule went unreplanned."""
    return frozenset(_imports(ast.parse(source, filename=filename), module, is_package))


@cache
def _cli_source_imports(source: str, filename: str, module: str,
                        is_package: bool) -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """A CLI module's imports outside its `cmd_*` handlers, and each handler's own (handler_imports),
    parsed once per process and source."""
    common: set[str] = set()
    handlers: dict[str, frozenset[str]] = {}
    for node in ast.parse(source, filename=filename).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("cmd_"):
            handlers[node.name] = frozenset(_imports(node, module, is_package))
        else:
            common |= _imports(node, module, is_package)
    return frozenset(common), handlers


def _parents(module: str) -> list[str]:
    """Importing a.b.c runs a/__init__ and a/b/__init__ first."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


@cache
def _closure(start: tuple[str, ...], root: Path) -> frozenset[str]:
    seen: set[str] = set()
    todo = list(start)
    while todo:
        module = todo.pop()
        if module in seen or _in_cli(module):  # the CLI: per command, through handler_imports
            continue
        if module == CATALOGUE_REFERENCES:
            seen.add(module)
            todo.extend(_referenced(root))
            continue
        path = _path(module, root)
        if path is None:  # a name imported from a module, not a module
            continue
        seen.add(module)
        todo.extend(_source_imports(path.read_text(), str(path), module, path.name == "__init__.py"))
        todo.extend(_parents(module))
    return frozenset(seen)


def _in_cli(module: str) -> bool:
    return module == CLI or module.startswith(CLI + ".")


def cli_modules(root: Path = ROOT) -> dict[str, Path]:
    """The CLI package's modules: its entry (`__init__`) and one module per family of commands."""
    folder = root / "cli"
    return {(CLI if p.stem == "__init__" else f"{CLI}.{p.stem}"): p for p in sorted(folder.glob("*.py"))}


def handler_imports(command: str, root: Path = ROOT) -> set[str]:
    """What `soaklab <command>` imports: the top level and parser of every CLI module (the entry
    imports every family to build the parser, so every command runs those), and its handler
    `cmd_<command>` (only that command runs it)."""
    name = "cmd_" + command.replace(" ", "_").replace("-", "_")
    found: set[str] = set()
    handler = False
    for module, path in cli_modules(root).items():
        common, handlers = _cli_source_imports(path.read_text(), str(path), module, path.name == "__init__.py")
        found |= common
        if name in handlers:
            found |= handlers[name]
            handler = True
    if not handler:
        raise KeyError(f"{root / 'cli'}: no handler {name} for `soaklab {command}`")
    return found


def command_sources(*commands: str, root: Path = ROOT) -> list[str]:
    """Every package file the given CLI commands can run, sorted; data files included."""
    start: set[str] = {f"{PACKAGE}.__main__"}
    for command in commands:
        start |= handler_imports(command, root)
    # The CLI's files themselves, but not their closure: the other handlers are other commands' code.
    modules = _closure(tuple(sorted(start)), root)
    files = {_path(m, root) for m in modules if m != CATALOGUE_REFERENCES} | set(cli_modules(root).values())
    for module, patterns in DATA.items():
        if module in modules:
            for pattern in patterns:
                files.update(p for p in root.glob(pattern) if p.is_file() and "__pycache__" not in p.parts)
    return sorted(str(f) for f in files if f is not None)


def code_stamp(commands: tuple[str, ...], stamps: Path, root: Path = ROOT) -> Path:
    """One small file standing for the commands' code: each source's sha256 and path. Rewritten only
    when that content changes, so its mtime moves exactly when the code does; a rule that takes it as
    input replans then, and its job printout names one file instead of dozens."""
    lines = [f"{hashlib.sha256(Path(f).read_bytes()).hexdigest()}  {Path(f).relative_to(root.parent)}"
             for f in command_sources(*commands, root=root)]
    text = "".join(f"{line}\n" for line in lines)
    path = stamps / ("+".join(c.replace(" ", "-") for c in commands) + ".sha256")
    try:
        unchanged = path.read_text() == text
    except OSError:
        unchanged = False
    if not unchanged:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path
