"""Reading and writing the JSON artifacts every stage produces.

Every JSON file soaklab reads from outside its own process (a run dir, a record, a kept
reproduction, a config or host description given as JSON) is read by `read_json`: a file is
anyone's to edit, so it is refused in one line (exit 2) before it is trusted when it is
- larger than MAX_JSON_BYTES (checked before a byte is read),
- nested deeper than MAX_JSON_DEPTH (the parser's recursion would otherwise end in a traceback),
- an object with a key given twice (which copy counts is the parser's choice, not the writer's),
- not JSON at all, or not UTF-8.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from stat import S_ISREG
from typing import Any

from soaklab.errors import InvalidInput

# The largest JSON file read: the biggest artifacts are a soak JSON's per-second samples, about
# 0.7 kB each (a 40-minute CPU soak's is 0.45 MB, a 7-day soak at one sample a second about 0.4 GB);
# records, comparisons and summaries are under 1 MB.
MAX_JSON_BYTES = 1 << 30
# The deepest nesting read: soaklab's own artifacts and schemas nest at most 11 levels.
MAX_JSON_DEPTH = 64


class JSONRefused(InvalidInput, ValueError):
    """A JSON input refused (exit 2, one line naming the file). A ValueError too, so that readers
    that already treat an unparseable file as unreadable treat a refused one the same way."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _DuplicateKey(key)
        found[key] = value
    return found


class _DuplicateKey(Exception):
    pass


def _depth(value: Any) -> int:
    """How deeply containers nest in a parsed value, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if level > MAX_JSON_DEPTH:
                break
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def loads_checked(text: str | bytes, where: str) -> Any:
    """JSON text parsed under read_json's rules; `where` names the file or flag in the refusal."""
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise JSONRefused(f"{where}: nested deeper than {MAX_JSON_DEPTH} levels (MAX_JSON_DEPTH); "
                          "not a file soaklab wrote") from None
    except _DuplicateKey as exc:
        raise JSONRefused(f"{where}: key {exc.args[0]!r} appears twice in one object; "
                          "not a file soaklab wrote") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise JSONRefused(f"{where}: not JSON ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
                          ) from None
    if _depth(value) > MAX_JSON_DEPTH:
        raise JSONRefused(f"{where}: nested deeper than {MAX_JSON_DEPTH} levels (MAX_JSON_DEPTH); "
                          "not a file soaklab wrote")
    return value


def read_json(path: Path | str) -> Any:
    """A JSON file, refused (JSONRefused: exit 2, one line naming it) when it is not a regular file,
    too large, too deeply nested, has a key twice or is not JSON. A missing or unreadable file raises
    OSError as open() does, for the caller to name in its own words."""
    # Opened without blocking: a FIFO planted in a run dir would otherwise hang the reader in open()
    # until some writer came (a resume, a soak's adoption, forever); a regular file ignores the flag.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        stat = os.fstat(fd)
        if not S_ISREG(stat.st_mode):
            raise JSONRefused(f"{path}: not a regular file (a FIFO, a device or a directory); soaklab reads "
                              "JSON only from regular files")
        fh = open(fd, "rb")  # noqa: SIM115 - owns fd from here, closed by the with below
    except BaseException:
        os.close(fd)
        raise
    with fh:
        size = stat.st_size
        if size > MAX_JSON_BYTES:
            raise JSONRefused(f"{path}: {size:,} bytes, over the {MAX_JSON_BYTES:,}-byte limit of a JSON file "
                              "soaklab reads (MAX_JSON_BYTES)")
        raw = fh.read(MAX_JSON_BYTES + 1)
    if len(raw) > MAX_JSON_BYTES:  # grew while read, or a file whose size fstat does not give
        raise JSONRefused(f"{path}: over the {MAX_JSON_BYTES:,}-byte limit of a JSON file soaklab reads "
                          "(MAX_JSON_BYTES)")
    return loads_checked(raw, str(path))


def umask() -> int:
    """This process's umask, read without changing it (os.umask would, for every thread, briefly)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def write_text_atomic(path: Path, text: str) -> None:
    """Write through a temporary file and rename, so readers never see half a file. The file gets
    the mode any new file would (mkstemp's own is 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~umask())
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, payload: dict[str, Any]) -> None:
    write_text_atomic(path, json.dumps(payload, indent=2) + "\n")


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()
