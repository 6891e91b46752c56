"""JSON schemas of every artifact soaklab writes, checked with jsonschema.

The same files are what CI and users validate against (`<name>.schema.json`).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from soaklab.errors import InvalidInput, RuntimeFailure
from soaklab.files.jsonfiles import read_json


@cache
def load_schema(name: str) -> dict[str, Any]:
    text = (resources.files("soaklab") / "schemas" / f"{name}.schema.json").read_text()
    schema = json.loads(text)
    if name == "run_config":
        # The names are the catalogue's, an installed plug-in's included (soaklab.catalogue): the
        # file lists none, so a new algorithm or backend is its module and its entry alone.
        from soaklab.catalogue import ALGORITHMS, BACKENDS

        for key, table in (("algo", ALGORITHMS), ("sim", BACKENDS)):
            schema["properties"][key]["enum"] = list(table)
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def schema_errors(name: str, payload: Any) -> list[str]:
    """Every violation of schema `name`, as 'path: message' lines (empty when valid)."""
    return errors_against(load_schema(name), payload)


def part_errors(name: str, key: str, payload: Any) -> list[str]:
    """Every violation of schema `name`'s property `key` by `{key: ...}` (a file that holds one part
    of an artifact, its $defs resolved), as schema_errors gives them."""
    schema = load_schema(name)
    return errors_against({"$defs": schema.get("$defs", {}), "type": "object", "required": [key],
                           "properties": {key: schema["properties"][key]}}, payload)


def errors_against(schema: dict[str, Any], payload: Any) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema)
    return [
        f"{'/'.join(str(p) for p in err.absolute_path) or '<root>'}: {err.message}"
        for err in sorted(validator.iter_errors(payload), key=lambda e: list(e.absolute_path))
    ]


def validate_artifact(name: str, payload: Any) -> None:
    """Refuse to write an artifact that breaks its own schema (a soaklab bug, exit 1)."""
    errors = schema_errors(name, payload)
    if errors:
        raise RuntimeFailure(f"{name}: artifact violates its schema: {errors[0]}")


def load_artifact(name: str, path: Path, fix: str) -> Any:
    """Read an artifact another step wrote and check it against its schema; fail closed naming it."""
    try:
        payload = read_json(path)
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"{path}: unreadable {name} ({exc}); {fix}") from None
    errors = schema_errors(name, payload)
    if errors:
        raise InvalidInput(f"{path}: {name} violates its schema ({errors[0]}); {fix}")
    return payload
