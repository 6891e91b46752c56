"""Outputs never overwrite inputs: every command that writes compares the real paths of what it
writes with the real paths of what it reads (symlinks and `..` resolved) and refuses, before reading
or writing anything, an output that is an input, lies inside an input folder (a run dir is evidence),
or is another output of the same command."""

from __future__ import annotations

import os
from pathlib import Path

from soaklab.errors import InvalidInput


def check_out_file(out: Path, suffix: str) -> None:
    """A command's one output file (`--out`): of its kind (`suffix`), not a directory, in a directory
    that exists (`soaklab export`, `soaklab play`)."""
    if out.suffix != suffix:
        raise InvalidInput(f"--out {out}: must end in {suffix}")
    if out.is_dir() or not out.parent.is_dir():
        raise InvalidInput(f"--out {out}: its directory {out.parent} does not exist (or it is a directory)")


def dest(flag: str) -> str:
    """The argparse destination of a flag as typed (`--run-dir`) or of a positional's metavar (`RUN_DIR`)."""
    return flag.lstrip("-").replace("-", "_").lower()


def refuse_overlaps(inputs: dict[str, Path | None], outputs: dict[str, Path | None]) -> None:
    """InvalidInput naming both paths when an output is, or is inside, an input, or repeats another output."""
    real_inputs = {name: Path(os.path.realpath(p)) for name, p in inputs.items() if p is not None}
    seen: dict[Path, str] = {}
    for name, path in outputs.items():
        if path is None:
            continue
        real = Path(os.path.realpath(path))
        for in_name, source in real_inputs.items():
            if real == source or source in real.parents:
                where = "is" if real == source else "is inside"
                raise InvalidInput(f"{name} {path}: {where} the input {in_name} {inputs[in_name]} ({source}); "
                                   "writing it would overwrite what this command reads; choose another path")
        if real in seen:
            raise InvalidInput(f"{name} {path}: is also {seen[real]} ({real}); give each output its own path")
        seen[real] = f"{name} {path}"


def _derived(path: Path) -> bool:
    """A file `soaklab export` or `soaklab play` writes into a run dir (which may write it again):
    the .onnx and its parity and contract JSON, the .mp4 and the sheet and record beside it."""
    if path.suffix in (".onnx", ".mp4") or path.name.endswith((".parity.json", ".contract.json")):
        return True
    return path.suffix in (".png", ".json") and path.with_suffix(".mp4").is_file()


def refuse_over_evidence(run_flag: str, run_dir: Path, outputs: dict[str, Path]) -> None:
    """Commands that add files to a run dir (export, play) may not overwrite what the run wrote:
    an output that is an existing file of the run dir, other than one of theirs, is refused."""
    base = Path(os.path.realpath(run_dir))
    for name, path in outputs.items():
        real = Path(os.path.realpath(path))
        if base in real.parents and real.is_file() and not _derived(real):
            raise InvalidInput(f"{name} {path}: is {real}, evidence of the run in {run_flag} {run_dir}; "
                               "writing it would destroy it; choose another path")


def _deploy_record(path: Path) -> bool:
    """A record `soaklab deploy-check` wrote (which it may write again)."""
    from soaklab.files.jsonfiles import read_json

    try:
        return path.stat().st_size < (1 << 20) and read_json(path).get("kind") == "deploy_check"
    except (OSError, ValueError, AttributeError):  # unreadable, refused JSON (a ValueError), not an object
        return False


def refuse_over_policy_folder(onnx: Path, out: Path) -> None:
    """`soaklab deploy-check --out` beside the ONNX it reads: the folder holding it is a run dir (export
    writes into one) or a deployment's folder, so an existing file there other than an earlier
    deploy-check record (the run's summary, the contract and parity beside the ONNX) is refused."""
    base, real = Path(os.path.realpath(onnx)).parent, Path(os.path.realpath(out))
    if base in real.parents and real.is_file() and not _deploy_record(real):
        raise InvalidInput(f"--out {out}: is {real}, evidence of the run (or the export) beside POLICY_ONNX {onnx}; "
                           "writing it would destroy it; choose another path")
