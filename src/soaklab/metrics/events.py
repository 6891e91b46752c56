"""Reading a run's metrics: the metric schema from run_summary.json, every scalar of its one event file.

Fail closed (exit 2) on what would make numbers ambiguous: no or several event
files, a missing, boolean or unsupported metric_schema_version, legacy tags in a
schema-1 run. Legacy unversioned runs (no metric_schema_version, lower-case
perf/*, timing/* tags) are read only when asked with --legacy-unversioned.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import loads_checked, read_json
from soaklab.metrics.tags import IDENTITY_TAG, SUPPORTED_SCHEMAS, V1_RENAMES

LEGACY_PREFIXES = ("perf/", "timing/")
LEGACY_FLAG = "--legacy-unversioned"


def metric_schema(run_dir: Path, legacy: bool) -> int | None:
    """The run's metric_schema_version (None for a legacy run read with --legacy-unversioned)."""
    path = run_dir / "run_summary.json"
    try:
        summary = read_json(path)
    except FileNotFoundError:
        raise InvalidInput(f"{path}: missing; metrics are read only from a finished run's directory") from None
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"{path}: unreadable ({exc})") from None
    if not isinstance(summary, dict) or "metric_schema_version" not in summary:
        if legacy:
            return None
        raise InvalidInput(f"{path}: no metric_schema_version; a legacy unversioned run is read only with "
                           f"{LEGACY_FLAG}")
    version = summary["metric_schema_version"]
    if legacy:
        raise InvalidInput(f"{LEGACY_FLAG}: {path} declares metric_schema_version={json.dumps(version)}; "
                           "drop the flag")
    if isinstance(version, bool) or version not in SUPPORTED_SCHEMAS:
        raise InvalidInput(f"{path}: metric_schema_version={json.dumps(version)}: unsupported; this soaklab "
                           f"reads versions {', '.join(map(str, SUPPORTED_SCHEMAS))}")
    return version


def current_tags(frame: pd.DataFrame) -> pd.DataFrame:
    """A schema-1 run's scalars under schema 2's tags and units (a schema-2 frame is unchanged)."""
    frame = frame.copy()
    for old, (new, factor) in V1_RENAMES.items():
        rows = frame["tag"] == old
        frame.loc[rows, "value"] = frame.loc[rows, "value"] * factor
        frame.loc[rows, "tag"] = new
    return frame


def event_file(run_dir: Path) -> Path:
    found = sorted(run_dir.glob("events.out.tfevents.*"))
    if not found:
        raise InvalidInput(f"{run_dir}: no TensorBoard event file (events.out.tfevents.*)")
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise InvalidInput(f"{run_dir}: {len(found)} event files ({names}); a run writes exactly one")
    return found[0]


def record_bodies(path: Path, upto_damage: bool = False) -> list[bytes]:
    """The event file's records, each checked against its CRCs (verify_records' walk). `upto_damage`:
    the records before the first damaged one (a killed writer's cut last record), not an error."""
    from tensorboard.summary.writer.record_writer import masked_crc32c

    bodies: list[bytes] = []
    try:
        for record in _records(path.read_bytes(), path, masked_crc32c):
            if isinstance(record, Damage):
                raise InvalidInput(f"{path}: {record.words} at byte offset {record.start}")
            bodies.append(record.body)
    except InvalidInput:
        if not upto_damage:
            raise
    return bodies


@dataclass(frozen=True)
class Record:
    start: int  # byte offset of its header
    body: bytes


@dataclass(frozen=True)
class Damage:
    """Bytes no record can be read from. `cut`: the file ends inside this record (a killed writer);
    otherwise its length and the length's CRC hold but its data fails its CRC, so the next record
    starts right after it and the walk goes on there."""

    start: int
    end: int
    cut: bool
    words: str


def _records(data: bytes, path: Path, masked_crc32c: Any) -> Iterator[Record | Damage]:
    offset = 0
    while offset < len(data):
        header = data[offset:offset + 12]
        if len(header) < 12:
            yield Damage(offset, len(data), True, "truncated event record header")
            return
        length = struct.unpack("<Q", header[:8])[0]
        if struct.unpack("<I", header[8:])[0] != masked_crc32c(header[:8]):
            # Where the next record starts is unknown: scanning for one would be a guess.
            raise InvalidInput(f"{path}: corrupted event record length at byte offset {offset}")
        end = offset + 12 + length + 4
        if end > len(data):
            yield Damage(offset, len(data), True, f"truncated event record ({length} bytes announced, "
                                                  f"{len(data) - offset - 16} present)")
            return
        body = data[offset + 12:offset + 12 + length]
        if struct.unpack("<I", data[end - 4:end])[0] != masked_crc32c(body):
            yield Damage(offset, end, False, "corrupted event record data")
        else:
            yield Record(offset, body)
        offset = end


@dataclass(frozen=True)
class CarryPlan:
    """What a resume at iteration `before_step` keeps of the event file `source` (docs/runtime.md,
    "Resuming a run"): every readable record before that step, in file order, without the
    file-version header (`bodies`, byte for byte), and the gaps where damaged bytes may have held
    rows before that step. Rows at or after it are the killed segment's lost work, rewritten."""

    source: Path
    before_step: int
    bodies: tuple[bytes, ...]
    gaps: tuple[dict[str, Any], ...]

    def record(self) -> dict[str, Any]:
        """What the resumed segment records of its carry (segments.json, then run_summary.json)."""
        return {"from": self.source.name, "rows": len(self.bodies), "gaps": list(self.gaps)}


def plan_carry(path: Path, before_step: int) -> CarryPlan:
    """Read every record of `path` that can be read. A record whose data fails its CRC is skipped
    (its length is sound, so the walk goes on right after it), and so is a cut last record; where
    either could hide rows before `before_step` it is a gap: its byte range, the steps it lies
    between and the rows of every per-iteration series missing there. A record whose CRCs hold but
    whose data does not parse as an Event is such damage too. A length that fails its CRC is refused
    (InvalidInput naming the byte offset): nothing after it can be found without guessing."""
    from tensorboard.summary.writer.record_writer import masked_crc32c

    walked: list[tuple[Record | Damage, Any]] = []
    for item in _records(path.read_bytes(), path, masked_crc32c):
        event = parse_event(item.body) if isinstance(item, Record) else None
        if isinstance(item, Record) and event is None:  # its CRCs hold, its bytes are no Event: damage all the same
            item = Damage(item.start, item.start + 16 + len(item.body), False, "event record data that is not an Event")
        walked.append((item, None if event is not None and event.HasField("file_version") else event))
    keep = [(r, e) for r, e in walked if isinstance(r, Record) and e is not None and e.step < before_step]
    rows = _rows([e for _, e in keep])
    gaps: list[dict[str, Any]] = []
    for i, (item, _) in enumerate(walked):
        if not isinstance(item, Damage):
            continue
        after = next((e.step for _, e in reversed(walked[:i]) if e is not None), None)
        later = next((e.step for _, e in walked[i + 1:] if e is not None), None)
        if after is not None and after >= before_step:
            continue  # among the rows the resume rewrites anyway
        lo = after if after is not None else 0
        hi = before_step - 1 if later is None else min(later, before_step - 1)
        gaps.append({"file": path.name, "byte_start": item.start, "byte_end": item.end, "damage": item.words,
                     "steps": [lo, hi], "missing_rows": _missing(rows, lo, hi)})
    return CarryPlan(path, before_step, tuple(r.body for r, _ in keep), tuple(gaps))


def parse_event(body: bytes) -> Any:
    """A record's body as a TensorBoard Event, or None where its bytes do not parse as one (a record
    whose CRCs hold can still be anything: they guard against damage, not against a writer)."""
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto.event_pb2 import Event

    try:
        return Event.FromString(body)
    except DecodeError:
        return None


def _rows(events: list[Any]) -> dict[str, set[int]]:
    """Each scalar tag's steps among `events`."""
    rows: dict[str, set[int]] = {}
    for event in events:
        for value in event.summary.value:
            rows.setdefault(value.tag, set()).add(event.step)
    return rows


PER_ITERATION = "Perf/"  # series logged at every iteration: a step missing there is a missing row


def _missing(rows: dict[str, set[int]], lo: int, hi: int) -> dict[str, list[int]]:
    return {tag: missing for tag, steps in sorted(rows.items()) if tag.startswith(PER_ITERATION)
            and (missing := [s for s in range(max(lo, min(steps)), hi + 1) if s not in steps])}


def frame_records(bodies: Iterable[bytes]) -> bytes:
    """Records in TFRecord framing, as TensorBoard's RecordWriter writes each."""
    from tensorboard.summary.writer.record_writer import masked_crc32c

    out = bytearray()
    for body in bodies:
        header = struct.pack("<Q", len(body))
        out += header + struct.pack("<I", masked_crc32c(header)) + body + struct.pack("<I", masked_crc32c(body))
    return bytes(out)


def verify_records(path: Path) -> int:
    """Walk the event file's record framing (u64 length, its masked CRC-32C, the data, its masked
    CRC-32C) and return the record count. TensorBoard's reader stops quietly at a bad or cut record,
    which would pass a damaged file off as a shorter run: here it fails, naming the byte offset."""
    return len(record_bodies(path))


def read_events(path: Path) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """Every scalar point (no TensorBoard sampling cap) as columns tag, step, wall_time, value, and
    the run identity the trainer wrote into the file (None in files that carry none)."""
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, TENSORS, EventAccumulator

    acc = EventAccumulator(str(path), size_guidance={SCALARS: 0, TENSORS: 1})
    acc.Reload()
    rows = [(tag, e.step, e.wall_time, e.value) for tag in acc.Tags()[SCALARS] for e in acc.Scalars(tag)]
    frame = pd.DataFrame(rows, columns=["tag", "step", "wall_time", "value"])
    identity = None
    text_tag = f"{IDENTITY_TAG}/text_summary"
    if text_tag in acc.Tags()[TENSORS]:
        raw = acc.Tensors(text_tag)[0].tensor_proto.string_val[0].decode()
        identity = loads_checked(raw, f"{path}: {IDENTITY_TAG}")
    return frame.sort_values(["tag", "step"], kind="stable").reset_index(drop=True), identity


def read_scalars(path: Path) -> pd.DataFrame:
    return read_events(path)[0]


def check_tags(frame: pd.DataFrame, schema: int | None, path: Path) -> None:
    tags = sorted(frame["tag"].unique())
    if not tags:
        raise InvalidInput(f"{path}: holds no scalars")
    legacy = [t for t in tags if t.startswith(LEGACY_PREFIXES)]
    if schema is not None and legacy:
        raise InvalidInput(f"{path}: legacy tag {legacy[0]} in a metric_schema_version {schema} run; "
                           "the event file does not belong to this run summary")
    older = [t for t in tags if t in V1_RENAMES]
    if schema is not None and schema >= 2 and older:
        raise InvalidInput(f"{path}: schema-1 tag {older[0]} in a metric_schema_version {schema} run; "
                           "the event file does not belong to this run summary")
