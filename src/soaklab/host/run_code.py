"""The code a run runs, so that a resume continues a run only on the code its checkpoint was made with
(docs/runtime.md, "Resuming a run").

A resumed run is its unbroken self bit for bit only where the same code computes it: the package files
`soaklab train` can run (soaklab.dag.codedeps, the same closure the workflow's train_soak rule is
replanned on: the learner, the collector, every agent, task and stepper the catalogue names), the
Python files of each plug-in package an entry of the run comes from, and the versions of the
interpreter and of the libraries the run's backend steps with. Every learner checkpoint records
them, and so does every segment of the run; `--resume` refuses a checkpoint made by other code in one
line naming what differs.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Any

from soaklab.catalogue import BACKENDS, RUN_FIELDS, RUN_REFERENCES
from soaklab.dag.codedeps import ROOT, command_sources


def _plugin_files(algo: str, task: str, sim: str) -> list[tuple[str, Path]]:
    """The Python files of every plug-in package an entry of the run comes from (its whole top-level
    package, so a helper module its entry imports counts too), each with its name in the digest
    (relative to the package's parent folder)."""
    names = {"algo": algo, "task": task, "sim": sim}
    tops: set[str] = set()
    for run_field, entry_fields in RUN_REFERENCES.items():
        entry = RUN_FIELDS[run_field][names[run_field]]
        tops.update(getattr(entry, field).partition(":")[0].split(".")[0] for field in entry_fields)
    files: dict[str, Path] = {}
    for top in sorted(tops - {"soaklab"}):
        spec = importlib.util.find_spec(top)
        if spec is None:
            continue
        if spec.submodule_search_locations:  # a package
            for folder in map(Path, spec.submodule_search_locations):
                for path in sorted(folder.rglob("*.py")):
                    # Only files an import can load: an editor's lock file (Emacs' `.#env.py`, a dangling
                    # link), a FIFO or a folder named *.py would end a train in a traceback or a hang.
                    # The first portion of a namespace package holds a name, as the import finds it.
                    if "__pycache__" not in path.parts and path.stem.isidentifier() and path.is_file():
                        files.setdefault(f"{top}/{path.relative_to(folder).as_posix()}", path)
        elif spec.origin and Path(spec.origin).is_file():
            files[Path(spec.origin).name] = Path(spec.origin)
    return sorted(files.items())


def run_code(algo: str, task: str, sim: str) -> dict[str, Any]:
    """{"sources_sha256": "sha256:<hex>", "versions": {name: version}, "commit", "dirty"} of a run of
    these entries. The digest covers each file's path (relative to its package) and contents, in
    order; the git commit of the package's source (None outside a checkout) is only said, never
    compared: the same sources are the same code whatever commit holds them."""
    from soaklab.host.info import git_state, versions

    names = ("python", *BACKENDS[sim].versions)
    found = versions(names)
    # plain str: torch's __version__ is a str subclass, which a weights_only load refuses
    plain = {name: None if found[name] is None else str(found[name]) for name in names}
    return {"sources_sha256": sources_sha256(algo, task, sim), "versions": plain, **git_state(ROOT)}


def sources_sha256(algo: str, task: str, sim: str) -> str:
    """"sha256:<hex>" of the training sources alone: what a soak compares before it adopts a kept run
    (it imports no library to ask its version; the trainer checks those)."""
    digest = hashlib.sha256()
    ours = [(Path(f).relative_to(ROOT.parent).as_posix(), Path(f)) for f in command_sources("train")]
    for name, path in [*ours, *_plugin_files(algo, task, sim)]:
        digest.update(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {name}\n".encode())
    return f"sha256:{digest.hexdigest()}"


def code_change(saved: Any, now: dict[str, Any]) -> str | None:
    """What differs between the code a checkpoint recorded (`saved`, as loaded) and this run's, in
    words; None if nothing does. A checkpoint without a record was made before soaklab kept one.
    A crafted record's values may be anything a weights_only load builds (a tensor, whose `!=` is a
    tensor): only a str (or None) equal to this run's is the same."""
    if not isinstance(saved, dict) or not isinstance(saved.get("versions"), dict):
        return "it records no code (made by a soaklab older than its code record)"
    changes = []
    if not _same(saved.get("sources_sha256"), now["sources_sha256"]):
        changes.append(f"the training sources were {_short(saved.get('sources_sha256'))}, "
                       f"now {_short(now['sources_sha256'])}")
    for name, version in now["versions"].items():
        if not _same(saved["versions"].get(name), version):
            changes.append(f"{name} was {_short(saved['versions'].get(name))}, now {version}")
    return "; ".join(changes) or None


def _same(saved: Any, now: str | None) -> bool:
    return saved is None if now is None else isinstance(saved, str) and saved == now


def made_at(saved: Any) -> str:
    """Where a checkpoint's code came from, as its record says: "commit <hex>" (", with local
    changes"), or "an unknown commit"."""
    commit = saved.get("commit") if isinstance(saved, dict) else None
    if not isinstance(commit, str) or not commit:
        return "an unknown commit"
    return f"commit {_short(commit)}" + (", with local changes" if saved.get("dirty") is True else "")


def _short(value: Any, limit: int = 19) -> str:
    """A recorded value as said in one line (a crafted file's may be anything, of any length or depth:
    only a str or a plain scalar is shown, anything else by its kind, never by a repr that could
    recurse past the interpreter's limit)."""
    if isinstance(value, str):
        text = value
    elif value is None or isinstance(value, bool | int | float):
        text = repr(value)
    else:
        text = f"a {type(value).__name__}"
    text = " ".join(text.split())
    return f"{text[:limit]}..." if len(text) > limit else text
