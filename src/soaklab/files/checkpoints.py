"""Where a run dir's resumable checkpoints lie (docs/runtime.md, "Resuming a run"), and the one
loader of every checkpoint soaklab reads, as data only (load_weights).

One place for their names: the trainer writes and reads them (soaklab.rl.resume); the soak monitor
only looks at which exist, without loading any (a checkpoint holds the replay ring: gigabytes on a
GPU run), to decide whether an interrupted run can be resumed.
"""

from __future__ import annotations

import pickle
import re
import zipfile
from pathlib import Path
from typing import Any

from soaklab.errors import InvalidInput

RESUME_DIR = "resume"
_LEARNER = re.compile(r"learner_(\d+)\.pt")


def resume_dir(run_dir: Path) -> Path:
    return run_dir / RESUME_DIR


def collector_path(run_dir: Path, iteration: int) -> Path:
    return resume_dir(run_dir) / f"collector_{iteration}.pt"


def learner_path(run_dir: Path, iteration: int) -> Path:
    """The learner's file is written last and names the checkpoint (its collector file came first)."""
    return resume_dir(run_dir) / f"learner_{iteration}.pt"


def checkpoint_iterations(run_dir: Path) -> list[int]:
    """The iterations of the learner checkpoints present, oldest first (present, not yet read)."""
    found = [int(m.group(1)) for p in resume_dir(run_dir).glob("learner_*.pt") if (m := _LEARNER.fullmatch(p.name))]
    return sorted(found)


def check_archive(path: Path) -> None:
    """Refuse a checkpoint whose members declare more than the file holds, before torch reads it.

    torch.save writes a zip whose members are stored, not compressed. So a member that declares
    more bytes than it takes in the file, or members that together declare more than the file's
    size, mark a forged archive: torch would allocate whatever it declares."""
    try:
        size = path.stat().st_size
        with zipfile.ZipFile(path) as zf:
            members = zf.infolist()
    except FileNotFoundError:
        raise InvalidInput(f"{path}: no such checkpoint") from None
    except (OSError, zipfile.BadZipFile) as exc:
        raise InvalidInput(f"{path}: not a soaklab checkpoint (not a torch zip archive: {exc})") from None
    total = 0
    for member in members:
        if member.file_size > member.compress_size:
            raise InvalidInput(f"{path}: member {member.filename} declares {member.file_size:,} bytes in "
                               f"{member.compress_size:,}; not a checkpoint torch wrote")
        total += member.file_size
    if total > size:
        raise InvalidInput(f"{path}: its members declare {total:,} bytes, the file holds {size:,}; "
                           "not a checkpoint torch wrote")


def load_weights(path: Path) -> Any:
    """A checkpoint file's payload, loaded as data only, or one line on why it cannot be: missing, a
    directory, truncated, forged, not a torch file at all, or not plain data. Every checkpoint soaklab
    reads (a policy's, a resume's learner and collector state) comes through here: a run dir copied
    from a colleague or a shared disk is data, and weights_only refuses any pickled object that is not
    a tensor, a number, a string or a container of those (docs/runtime.md, "Resuming a run"), so a
    crafted file never runs its code."""
    import torch

    check_archive(path)
    try:
        # From the path, not a copy in memory: a resume's learner file holds the replay ring.
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise InvalidInput(f"{path}: no such checkpoint") from None
    except pickle.UnpicklingError as exc:
        raise InvalidInput(f"{path}: not plain data ({not_plain(str(exc))}); refused, nothing in it ran") from None
    except (OSError, RuntimeError, KeyError, TypeError, ValueError, EOFError) as exc:
        # torch's own message runs to paragraphs; its first line says enough.
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise InvalidInput(f"{path}: not a soaklab checkpoint ({type(exc).__name__}: {first})") from None


_GLOBAL = re.compile(r"GLOBAL (\S+) was not an allowed global")


def not_plain(message: str) -> str:
    """What weights_only refused, in a few words: torch's message also advises loading the file with
    weights_only=False, exactly what a file from elsewhere must never be."""
    if found := _GLOBAL.search(message):
        return f"it names {found.group(1)}, which no soaklab checkpoint holds"
    detail = message.split("WeightsUnpickler error:", 1)[-1].strip().splitlines()
    return detail[0][:160] if detail else "a pickled object weights_only refuses"
