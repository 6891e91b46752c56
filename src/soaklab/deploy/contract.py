"""The policy contract inside an ONNX file: where it is kept, and the checks a file must pass before
anything runs from it (docs/export.md, "The contract"; each refusal is one line, exit 2).

The contract is one JSON value under the metadata key `soaklab.contract`, with a few flat keys beside
it that a C++ loader can read without a JSON parser (as mjlab writes them). It names the model it
belongs to by the SHA-256 of the ONNX graph (nodes, weights, inputs and outputs; the metadata is not
part of it), so a contract copied onto another policy's file is refused.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import loads_checked
from soaklab.schemas import schema_errors

SCHEMA_VERSION = 1
CONTRACT_KEY = "soaklab.contract"
VERSION_KEY = "soaklab.contract_schema_version"
SIDECAR_SUFFIX = ".contract.json"
# A contract is a few hundred kB at most (G1: its probe's 3 x 160 observations, its clips' entries);
# a larger one is refused before it is parsed.
MAX_CONTRACT_BYTES = 1 << 20
SHOWN_CHARS = 160  # of a value quoted in a refusal: the line stays one short line


def short(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


def non_finite(value: Any, where: str = "") -> str | None:
    """The first field holding NaN or an infinity (JSON allows neither; Python's reader takes both)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where or 'the contract'} is {value}"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if (found := non_finite(item, f"{where}.{key}" if where else str(key))) is not None:
            return found
    return None


def graph_sha256(model: Any) -> str:
    """The SHA-256 of an ONNX ModelProto's graph, serialized: what the contract belongs to."""
    return hashlib.sha256(model.graph.SerializeToString()).hexdigest()


def csv(values: list[Any]) -> str:
    return ",".join(repr(v) if isinstance(v, float) else str(v) for v in values)


def flat_metadata(contract: dict[str, Any]) -> dict[str, str]:
    """The flat keys written beside the contract, each derived from it (one place for each fact)."""
    channels = contract["action"]["channels"]
    return {
        VERSION_KEY: str(contract["schema_version"]),
        "joint_names": csv([c["joint"] for c in channels]),
        "default_joint_pos": csv([c["default_pos"] if c["default_pos"] is not None else 0.0 for c in channels]),
        "action_scale": csv([c["scale"] for c in channels]),
        "action_offset": csv([c["offset"] for c in channels]),
        "joint_stiffness": csv([c["kp"] if c["kp"] is not None else 0.0 for c in channels]),
        "joint_damping": csv([c["kd"] if c["kd"] is not None else 0.0 for c in channels]),
        "observation_names": csv([b["name"] for b in contract["observation"]["blocks"]]),
        "control_dt": repr(float(contract["timing"]["control_dt"])),
    }


def tiling_error(observation: dict[str, Any]) -> str | None:
    """Why the blocks do not cover [0, dim) exactly, each index once, in order; None when they do."""
    at = 0
    for block in observation["blocks"]:
        if block["start"] != at:
            what = "a gap" if block["start"] > at else "an overlap"
            return f"block {block['name']} starts at {block['start']}, not {at}: {what}"
        if block["stop"] <= block["start"]:
            return f"block {block['name']} is empty ([{block['start']}, {block['stop']}))"
        at = block["stop"]
    if at != observation["dim"]:
        return f"the blocks cover [0, {at}), the observation has {observation['dim']}"
    return None


CLIP_TERMINATIONS = ("body_height_error", "body_tilt_error", "reanchored_height_error")


def coherence_error(data: dict[str, Any]) -> str | None:
    """Why the parts of a schema-valid contract do not fit together, or None: what reads a clip
    needs one, an episode needs its end, the control step is the physics steps'."""
    readers = [f"block {b['name']}" for b in data["observation"]["blocks"] if b["source"]["kind"].startswith("clip")]
    readers += [f"termination {t['kind']}" for t in data["terminations"] if t["kind"] in CLIP_TERMINATIONS]
    readers += [f"{key} {data[key]['kind']}" for key in ("reset", "metrics")
                if data[key]["kind"] in ("clip_first_frame", "tracking")]
    if data["episode"]["end"] == "clip_last_frame":
        readers.append("episode end clip_last_frame")
    if readers and not data["clips"]:
        return f"{readers[0]} follows a clip, and the contract names none"
    if data["episode"]["end"] == "max_steps" and data["episode"]["max_steps"] is None:
        return "episode end max_steps needs max_steps"
    timing = data["timing"]
    if abs(timing["control_dt"] - timing["decimation"] * timing["sim_timestep"]) > 1e-9:
        return (f"timing: control_dt {timing['control_dt']} is not decimation {timing['decimation']} x sim_timestep "
                f"{timing['sim_timestep']}")
    return None


@dataclass(frozen=True)
class Contract:
    path: Path  # the ONNX file
    data: dict[str, Any]
    model_bytes: bytes  # the file as read: the session runs exactly what was checked

    def __getitem__(self, key: str) -> Any:
        return self.data[key]


def read_contract(path: Path) -> Contract:
    """The contract of the ONNX file at `path`, checked: present, of a known schema version, valid,
    its flat keys its own, its slices tiling the observation, the graph's hash its model's."""
    try:
        return _read_contract(path)
    except InvalidInput as exc:  # a crafted integer of 400 digits is quoted by its first 12
        raise InvalidInput(re.sub(r"\d{24,}", lambda m: f"{m[0][:12]}...({len(m[0])} digits)", str(exc))) from None


def _read_contract(path: Path) -> Contract:
    import onnx

    if not path.is_file():
        raise InvalidInput(f"{path}: no such ONNX file")
    raw = path.read_bytes()
    if not raw:  # protobuf reads b"" as an empty model: say what it is
        raise InvalidInput(f"{path}: an empty file, not an ONNX model; export the policy again")
    try:
        model = onnx.load_from_string(raw)
    except Exception as exc:  # protobuf's DecodeError and kin: a file that is not ONNX
        raise InvalidInput(f"{path}: not an ONNX model ({type(exc).__name__})") from None
    meta = {p.key: p.value for p in model.metadata_props}
    if CONTRACT_KEY not in meta:
        raise InvalidInput(f"{path}: no policy contract in its metadata (exported before contracts, or not by "
                           "soaklab); export it again with `soaklab export RUN_DIR --out ...`")
    where = f"{path}: metadata {CONTRACT_KEY}"
    if len(meta[CONTRACT_KEY]) > MAX_CONTRACT_BYTES:
        raise InvalidInput(f"{where}: {len(meta[CONTRACT_KEY])} characters, more than a contract's "
                           f"{MAX_CONTRACT_BYTES} (MAX_CONTRACT_BYTES); not a contract soaklab wrote")
    data = loads_checked(meta[CONTRACT_KEY].encode(), where)
    if (bad := non_finite(data)) is not None:
        raise InvalidInput(f"{where}: {short(bad)}; a contract's numbers are finite; export the policy again")
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        raise InvalidInput(f"{where}: schema_version {version!r} is unknown; this soaklab reads "
                           f"{SCHEMA_VERSION} (use the soaklab that exported it, or export it again)")
    errors = schema_errors("policy_contract", data)
    if errors:
        raise InvalidInput(f"{where}: {short(errors[0])} (schemas/policy_contract.schema.json)")
    if (incoherent := coherence_error(data)) is not None:
        raise InvalidInput(f"{where}: {incoherent}; export the policy again")
    if (tiling := tiling_error(data["observation"])) is not None:
        raise InvalidInput(f"{where}: its observation slices do not tile the {data['observation']['dim']} "
                           f"observations: {tiling}")
    for key, value in flat_metadata(data).items():
        if meta.get(key) != value:
            raise InvalidInput(f"{path}: metadata {key} is {str(meta.get(key))[:40]!r}, the contract says "
                               f"{value[:40]!r}; the flat keys must be written from the contract")
    digest, theirs = graph_sha256(model), data["model_file"]["graph_sha256"]
    if digest != theirs:
        raise InvalidInput(f"{where}: belongs to another model (its graph_sha256 {theirs[:12]}, this file's graph "
                           f"{digest[:12]}); export the policy again rather than copy a contract")
    graph = {"input": [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim][1:],
             "output": [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim][1:]}
    widths = {"input": data["observation"]["dim"], "output": len(data["action"]["channels"])}
    for side, width in widths.items():
        named = data["model_file"][side]["shape"][1:]
        if graph[side] != [width] or named != [width]:
            raise InvalidInput(f"{where}: the model's {side} is {graph[side]} wide, the contract says {named} and "
                               f"describes {width}; export the policy again")
    probe = data["probe"]["observations"]
    if data["action"]["dim"] != widths["output"] or any(len(o) != widths["input"] for o in probe):
        raise InvalidInput(f"{where}: action dim {data['action']['dim']}, {widths['output']} channels and the probe's "
                           f"observations must fit the model; export the policy again")
    if (stale := sidecar_difference(path, data)) is not None:
        raise InvalidInput(stale)
    return Contract(path, data, raw)


def first_difference(a: Any, b: Any, at: str = "") -> str | None:
    """The first key path where two JSON values differ ('' for the root), else None."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{at}.{key}".lstrip(".")
            if (found := first_difference(a[key], b[key], f"{at}.{key}")) is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return next((f for i, (x, y) in enumerate(zip(a, b, strict=True))
                     if (f := first_difference(x, y, f"{at}[{i}]")) is not None), None)
    same = type(a) is type(b) and a == b  # 1, 1.0 and True are equal in Python, not in a contract
    return None if same else (at.lstrip(".") or "(the whole contract)")


def sidecar_difference(path: Path, data: dict[str, Any]) -> str | None:
    """Where a readable contract sits beside the ONNX (`<stem>.contract.json`, written with it) but no
    longer says what the metadata says: the line refusing it. The metadata is what the policy was
    exported with; a sidecar edited, or left from an earlier export, would mislead whoever reads it."""
    readable = sidecar(path)
    if not readable.is_file():
        return None
    try:
        if readable.stat().st_size > MAX_CONTRACT_BYTES:
            raise ValueError(f"more than {MAX_CONTRACT_BYTES} bytes")
        theirs = loads_checked(readable.read_bytes(), str(readable))  # duplicate keys, depth: refused
    except (OSError, ValueError) as exc:
        return f"{readable}: unreadable beside {path.name} ({short(str(exc))}); export the policy again or remove it"
    if (at := first_difference(theirs, data)) is None:
        return None
    return (f"{readable}: differs from the contract in {path.name}'s metadata (first at {short(at)}); the "
            "metadata is what the policy was exported with: export it again, or remove the stale file")


def write_contract(path: Path, contract: dict[str, Any], readable: Path) -> None:
    """Put `contract` into the ONNX file at `path` (in place: written beside, then renamed) and write it
    readable at `readable` (`<stem>.contract.json` beside the model). The contract must be valid and
    tile."""
    import onnx

    from soaklab.errors import RuntimeFailure
    from soaklab.files.jsonfiles import write_json_atomic

    errors = schema_errors("policy_contract", contract)
    problem = errors[0] if errors else coherence_error(contract) or tiling_error(contract["observation"])
    if problem is not None:  # a task's contract function is wrong: a soaklab bug, exit 1, nothing written
        raise RuntimeFailure(f"policy contract: {problem}")
    model = onnx.load(str(path))
    for key, value in {CONTRACT_KEY: json.dumps(contract, sort_keys=True), **flat_metadata(contract)}.items():
        entry = next((p for p in model.metadata_props if p.key == key), None) or model.metadata_props.add()
        entry.key, entry.value = key, value
    tmp = path.with_name(path.name + ".tmp")
    onnx.save(model, str(tmp))
    tmp.replace(path)
    write_json_atomic(readable, contract)


def sidecar(path: Path) -> Path:
    return path.with_name(path.stem + SIDECAR_SUFFIX)
