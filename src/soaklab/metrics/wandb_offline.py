"""Read an offline W&B run back: its config, its scalar history and its summary.

wandb 0.31 writes an offline run as one transaction log (`offline-run-*/run-<id>.wandb`) and no
longer ships a Python reader for it. The file is a 7-byte W&B header, then LevelDB's log format
(32 KiB blocks of records, each a CRC, a length, a type: whole, first, middle or last fragment)
whose payloads are wandb's own `Record` protobuf messages. This reads that framing and decodes the
payloads with wandb's protobuf classes, so what is compared is what `wandb sync` would upload.
Used by the tests that hold W&B's series equal to TensorBoard's, and by anyone checking an offline
run without an account.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soaklab.files.jsonfiles import loads_checked

HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
BLOCK = 32 * 1024
RECORD_HEADER = 7  # crc32c (4), length (2), type (1)
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


class CorruptRun(ValueError):
    """The file is not a W&B transaction log, or its framing is broken."""


def payloads(path: Path) -> Iterator[bytes]:
    """Each record's bytes, fragments joined, in write order."""
    data = path.read_bytes()
    if not data.startswith(HEADER):
        raise CorruptRun(f"{path}: not a W&B run file (no ':W&B' header)")
    pos, pending = len(HEADER), bytearray()
    while pos + RECORD_HEADER <= len(data):
        left_in_block = BLOCK - pos % BLOCK
        if left_in_block < RECORD_HEADER:  # the block's tail is padding
            pos += left_in_block
            continue
        length, kind = struct.unpack_from("<HB", data, pos + 4)
        if kind == 0 and length == 0:  # zero padding (a block pre-allocated, or the end)
            pos += left_in_block
            continue
        body = data[pos + RECORD_HEADER: pos + RECORD_HEADER + length]
        if len(body) != length or kind not in (FULL, FIRST, MIDDLE, LAST):
            raise CorruptRun(f"{path}: broken record at byte {pos} (type {kind}, length {length})")
        pos += RECORD_HEADER + length
        if kind == FULL:
            yield bytes(body)
        elif kind == FIRST:
            pending = bytearray(body)
        else:
            pending += body
            if kind == LAST:
                yield bytes(pending)
                pending = bytearray()


@dataclass
class OfflineRun:
    """What one offline run file holds, decoded."""

    run_id: str | None = None
    project: str | None = None
    group: str | None = None
    tags: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    history: dict[str, dict[int, float]] = field(default_factory=dict)  # key -> step -> value
    summary: dict[str, Any] = field(default_factory=dict)
    artifacts: list[str] = field(default_factory=list)


def _key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


def read_offline_run(path: Path) -> OfflineRun:
    """Decode `run-<id>.wandb` (the file, or the `offline-run-*` folder that holds it)."""
    from wandb.proto import wandb_internal_pb2 as pb

    if path.is_dir():
        found = sorted(path.glob("run-*.wandb"))
        if len(found) != 1:
            raise CorruptRun(f"{path}: expected one run-*.wandb file, found {len(found)}")
        path = found[0]
    run = OfflineRun()
    for payload in payloads(path):
        record = pb.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            r = record.run
            run.run_id, run.project, run.group, run.tags = r.run_id, r.project, r.run_group, list(r.tags)
            for item in r.config.update:
                run.config[_key(item)] = loads_checked(item.value_json, str(path))
        elif kind == "config":
            for item in record.config.update:
                run.config[_key(item)] = loads_checked(item.value_json, str(path))
        elif kind == "history":
            values = {_key(item): loads_checked(item.value_json, str(path)) for item in record.history.item}
            step = int(values.pop("_step", record.history.step.num))
            for key, value in values.items():
                if not key.startswith("_") and isinstance(value, int | float):
                    run.history.setdefault(key, {})[step] = float(value)
        elif kind == "summary":
            for item in record.summary.update:
                run.summary[_key(item)] = loads_checked(item.value_json, str(path))
        elif kind == "artifact":
            run.artifacts.append(record.artifact.name)
    return run
