"""Reading a run's metrics: the metric schema from run_summary.json, every scalar of its one event file.

Fail closed (exit 2) on what would make numbers ambiguous: no or several event
files, a missing, boolean or unsupported metric_schema_version, legacy tags in a
schema-1 run. Legacy unversioned runs (no metric_schema_version, lower-case
perf/*, timing/* tags) are read only when asked with --legacy-unversioned.
"""

from __future__ import annotations

import json
import struct
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

    data = path.read_bytes()
    bodies: list[bytes] = []
    try:
        _walk(data, path, bodies, masked_crc32c)
    except InvalidInput:
        if not upto_damage:
            raise
    return bodies


def _walk(data: bytes, path: Path, bodies: list[bytes], masked_crc32c: Any) -> None:
    offset = 0
    while offset < len(data):
        header = data[offset:offset + 12]
        if len(header) < 12:
            raise InvalidInput(f"{path}: truncated event record header at byte offset {offset}")
        length = struct.unpack("<Q", header[:8])[0]
        if struct.unpack("<I", header[8:])[0] != masked_crc32c(header[:8]):
            raise InvalidInput(f"{path}: corrupted event record length at byte offset {offset}")
        end = offset + 12 + length + 4
        if end > len(data):
            raise InvalidInput(f"{path}: truncated event record at byte offset {offset} "
                               f"({length} bytes announced, {len(data) - offset - 16} present)")
        body = data[offset + 12:offset + 12 + length]
        if struct.unpack("<I", data[end - 4:end])[0] != masked_crc32c(body):
            raise InvalidInput(f"{path}: corrupted event record data at byte offset {offset}")
        bodies.append(body)
        offset = end


def carry_events(run_dir: Path, before_step: int) -> tuple[list[Any], Path | None]:
    """A resumed run's events so far: those of its event file before `before_step` (the iteration it
    resumes at), in file order, without the file-version header; and that file (None: no file yet).
    Events at or after the step are the killed segment's lost work, rewritten by the resume."""
    from tensorboard.compat.proto.event_pb2 import Event

    found = sorted(run_dir.glob("events.out.tfevents.*"))
    if not found:
        return [], None
    if len(found) > 1:
        raise InvalidInput(f"{run_dir}: {len(found)} event files; a run resumes with exactly one")
    events = [Event.FromString(body) for body in record_bodies(found[0], upto_damage=True)]
    return [e for e in events if not e.HasField("file_version") and e.step < before_step], found[0]


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
