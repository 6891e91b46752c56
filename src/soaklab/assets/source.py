"""Where the G1 model comes from: the pinned wheel, a local wheel, or a local directory.

Only the G1 subtree of a wheel is extracted, and every member is checked to
stay inside the destination (no absolute paths, no `..`), since a wheel is an
archive from outside the project.
"""

from __future__ import annotations

import email.parser
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from soaklab.errors import InvalidInput, RuntimeFailure
from soaklab.files.jsonfiles import sha256_file

OFFLINE_ENV = "SOAKLAB_OFFLINE"


@dataclass(frozen=True)
class PinnedWheel:
    package: str
    version: str
    sha256: str
    subtree: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def filename(self) -> str:
        return f"{self.package}-{self.version}-py3-none-any.whl"


# The G1 29-DoF MJCF and meshes as published inside mjlab 1.6.0 (docs/assets-and-tasks.md).
G1_WHEEL = PinnedWheel(
    package="mjlab",
    version="1.6.0",
    sha256="03d003854e2f44c48330c6dcf4c2253ff7641bb569747846825a21b9efa8540b",
    subtree="mjlab/asset_zoo/robots/unitree_g1/xmls/",
)
ROBOT_XML = "g1.xml"


def offline() -> bool:
    return os.environ.get(OFFLINE_ENV, "") == "1"


def fetch_pinned_wheel(wheel: PinnedWheel, cache_dir: Path, fix: str = "pass --source WHEEL_OR_DIR") -> Path:
    """Return the verified pinned wheel, downloading it with the environment's pip config if needed.
    `fix` is what the one-line error offers an air-gapped host."""
    cached = cache_dir / wheel.filename
    if cached.is_file() and sha256_file(cached) == wheel.sha256:
        return cached
    if offline():
        raise InvalidInput(
            f"{OFFLINE_ENV}=1: {wheel.requirement} is not cached at {cached} and fetching is disabled; "
            f"{fix} or unset the variable"
        )
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", "-d", tmp, wheel.requirement]
        print(f"assets: fetching {wheel.requirement} (pinned sha256 {wheel.sha256[:12]}...)", flush=True)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        got = Path(tmp) / wheel.filename
        if proc.returncode != 0 or not got.is_file():
            detail = (proc.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
            raise RuntimeFailure(
                f"assets: cannot fetch {wheel.requirement}: {detail}; {fix} on air-gapped hosts"
            )
        verify_wheel(got, wheel)
        os.replace(got, cached)
    return cached


def verify_wheel(path: Path, wheel: PinnedWheel) -> None:
    digest = sha256_file(path)
    if digest != wheel.sha256:
        raise InvalidInput(f"{path}: sha256 {digest} does not match the pinned {wheel.requirement} ({wheel.sha256})")


def safe_member_path(name: str, subtree: str) -> PurePosixPath | None:
    """The path of `name` relative to `subtree`, or None when it lies outside it (or is a folder).

    Every component is checked on the raw name, before and after the subtree prefix: an absolute
    name, an empty component (`a//b`: what follows it would join as an absolute path), `.`, `..`,
    a backslash, a drive letter or a NUL is refused, whatever the prefix."""
    folder = name.endswith("/")
    parts = (name[:-1] if folder else name).split("/")
    bad = (name.startswith("/") or "\\" in name or "\0" in name or ":" in parts[0]
           or any(part in ("", ".", "..") for part in parts))
    if bad:
        raise InvalidInput(f"archive member {name!r}: absolute, empty, '.' or parent-relative path component refused")
    if folder or not name.startswith(subtree):
        return None
    return PurePosixPath(name[len(subtree):])


def _member_kind_refused(member: zipfile.ZipInfo) -> str | None:
    """Why a member that is not a plain file (a symlink, device, fifo...) is refused, or None."""
    mode = member.external_attr >> 16
    if mode and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        return "a symlink or special file"
    return None


# What a member may declare it inflates to, one and all together: the G1 model's largest mesh is
# 5.6 MB and its subtree some 20 MB. A zip's declared size is read before a byte is inflated, so a
# bomb is refused before it can fill the disk.
MAX_MEMBER_BYTES = 64 << 20
MAX_SUBTREE_BYTES = 512 << 20
MAX_METADATA_BYTES = 1 << 20


def _check_declared(wheel_path: Path, members: list[zipfile.ZipInfo]) -> None:
    total = 0
    for member in members:
        if member.file_size > MAX_MEMBER_BYTES:
            raise InvalidInput(f"{wheel_path}: member {member.filename} declares {member.file_size:,} bytes "
                               f"(limit {MAX_MEMBER_BYTES:,}); not a model wheel")
        total += member.file_size
    if total > MAX_SUBTREE_BYTES:
        raise InvalidInput(f"{wheel_path}: the model's members declare {total:,} bytes together "
                           f"(limit {MAX_SUBTREE_BYTES:,}); not a model wheel")


def extract_subtree(wheel_path: Path, subtree: str, dest: Path) -> list[Path]:
    """Extract only `subtree` of a wheel into `dest`; return the files written. Nothing is written
    unless every member of the subtree is a plain file whose target lies inside `dest` and whose
    declared size is within the limits."""
    written: list[Path] = []
    root = dest.resolve()
    try:
        with zipfile.ZipFile(wheel_path) as zf:
            members = [(m, safe_member_path(m.filename, subtree)) for m in zf.infolist()]
            members = [(m, rel) for m, rel in members if rel is not None]
            if not any(rel.name == ROBOT_XML for _, rel in members):
                raise InvalidInput(f"{wheel_path}: no {subtree}{ROBOT_XML} in this wheel")
            _check_declared(wheel_path, [m for m, _ in members])
            targets = []
            for member, rel in members:
                why = _member_kind_refused(member)
                if why is not None:
                    raise InvalidInput(f"archive member {member.filename!r}: {why} refused")
                target = root.joinpath(*rel.parts)
                if not target.resolve().is_relative_to(root):  # e.g. through a symlink already there
                    raise InvalidInput(f"archive member {member.filename!r}: resolves outside {dest}")
                targets.append((member, target))
            for member, target in targets:
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(member) as src, open(target, "xb") as out:
                    shutil.copyfileobj(src, out)
                written.append(target)
    except zipfile.BadZipFile as exc:
        raise InvalidInput(f"{wheel_path}: not a wheel ({exc})") from None
    except FileExistsError as exc:
        raise InvalidInput(f"{wheel_path}: member {exc.filename} appears twice in the archive") from None
    return written


def wheel_license(wheel_path: Path) -> dict[str, Any]:
    """The licence as the wheel's METADATA states it, and the licence file it ships."""
    with zipfile.ZipFile(wheel_path) as zf:
        meta_info = next((i for i in zf.infolist() if i.filename.endswith(".dist-info/METADATA")), None)
        if meta_info is not None and meta_info.file_size > MAX_METADATA_BYTES:
            raise InvalidInput(f"{wheel_path}: {meta_info.filename} declares {meta_info.file_size:,} bytes "
                               f"(limit {MAX_METADATA_BYTES:,})")
        meta = email.parser.Parser().parsestr(zf.read(meta_info).decode(errors="replace")) if meta_info else None
        files = [n for n in zf.namelist() if ".dist-info/licenses/" in n and not n.endswith("/")]
    expression = (meta.get("License-Expression") or meta.get("License")) if meta else None
    return {"expression": expression, "files": files}


def copy_directory_source(src: Path, dest: Path) -> list[Path]:
    """Copy a local G1 model folder (g1.xml and its assets/) into `dest`."""
    if not (src / ROBOT_XML).is_file():
        nested = src / G1_WHEEL.subtree
        if (nested / ROBOT_XML).is_file():
            src = nested
        else:
            raise InvalidInput(f"--source {src}: no {ROBOT_XML} in this folder")
    written: list[Path] = []
    for path in sorted(src.rglob("*")):
        if path.is_file() and not path.is_symlink():
            target = dest / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            written.append(target)
    return written
