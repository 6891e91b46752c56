"""KEY=VALUE overrides: parsed as YAML scalars and checked raw before merging (docs/settings-contract.md).

The check happens on the value exactly as the user wrote it, so ``'2'`` (a
string) is refused where an int is required instead of being coerced.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf

from soaklab.config.keys import CHOICES, DERIVED_KEYS, INT_MAXIMUMS, INT_MINIMUMS, NULLABLE_KINDS, STR_OR_LIST_KEYS
from soaklab.config.yaml11 import EXPONENT_FLOAT, as_float_if_exponent
from soaklab.contract.contract import CONTRACT_KEYS, check_exact_int, is_exact_int
from soaklab.errors import InvalidInput, SettingError


@dataclass(frozen=True)
class Override:
    key: str
    value: Any
    text: str



def parse_overrides(items: Iterable[str]) -> list[Override]:
    """Parse KEY=VALUE strings; VALUE is a YAML scalar (or flow list)."""
    parsed: list[Override] = []
    seen: set[str] = set()
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InvalidInput(f"override {item!r}: expected KEY=VALUE, e.g. algo.num_envs=64")
        if key in seen:
            raise InvalidInput(f"override {key}: given more than once; keep one")
        seen.add(key)
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as exc:
            first = str(exc).splitlines()[0]
            raise InvalidInput(f"override {key}: value {raw!r} is not valid YAML ({first})") from None
        if isinstance(value, str) and EXPONENT_FLOAT.fullmatch(raw.strip()):  # unquoted only
            value = as_float_if_exponent(value)
        parsed.append(Override(key=key, value=value, text=item))
    return parsed


def suggest(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    return f"; did you mean {close[0]}?" if close else ""


def _kind_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def check_value_kind(key: str, value: Any, default: Any) -> None:
    """Refuse a value whose kind differs from the key's default (no silent coercion)."""
    if key in CHOICES:
        if value not in CHOICES[key]:
            raise SettingError(key, value, f"must be one of {', '.join(CHOICES[key])}")
        return
    if isinstance(default, dict):
        raise SettingError(key, value, "is a mapping; override one of its leaves instead")
    if value is None:
        if default is None:
            return
        raise SettingError(key, value, f"null is not allowed; expected a {_kind_name(default)}")
    if key in STR_OR_LIST_KEYS and isinstance(value, list):
        if not value or not all(isinstance(v, str) and v for v in value) or len(set(value)) != len(value):
            raise SettingError(key, value, "must be a clip (a name or an NPZ path) or a non-empty list of distinct "
                               "clips")
        return
    expected: type = NULLABLE_KINDS.get(key, type(default)) if default is None else type(default)
    if expected is type(None):
        raise SettingError(key, value, "takes no value here")
    if expected is bool:
        ok = isinstance(value, bool)
    elif expected is int:
        ok = is_exact_int(value)
    elif expected is float:
        ok = (is_exact_int(value) or isinstance(value, float)) and math.isfinite(float(value))
    else:
        ok = isinstance(value, expected)
    if not ok:
        raise SettingError(key, value, f"must be of type {expected.__name__}")
    if key in INT_MINIMUMS:
        check_exact_int(key, value, INT_MINIMUMS[key], INT_MAXIMUMS.get(key))


def apply_overrides(cfg: DictConfig, overrides: list[Override], known: list[str]) -> None:
    """Check every override's key, and the kind of each value the contract does not own, then merge
    it. A contract key's value is checked once, by the contract, on the composed config
    (soaklab.contract.contract.resolve_runtime_settings), whether an override or an owner file set it."""
    for o in overrides:
        if o.key in DERIVED_KEYS:
            raise SettingError(o.key, o.value, DERIVED_KEYS[o.key])
        if o.key not in known:
            raise InvalidInput(f"{o.key}: unknown configuration key{suggest(o.key, known)}")
    for o in overrides:
        if o.key not in CONTRACT_KEYS:
            default = OmegaConf.select(cfg, o.key)
            if isinstance(default, (DictConfig, ListConfig)):
                default = OmegaConf.to_container(default)
            check_value_kind(o.key, o.value, default)
    for o in overrides:
        OmegaConf.update(cfg, o.key, o.value, merge=False)


def merge_overrides(base: list[str], extra: list[str]) -> list[str]:
    """Later KEY=VALUE items replace earlier ones with the same key."""
    merged: dict[str, str] = {}
    for item in [*base, *extra]:
        merged[item.partition("=")[0].strip()] = item
    return list(merged.values())
