"""Compose the owner YAML tree with OmegaConf in struct mode (docs/settings-contract.md).

Layers, lowest first:
  defaults/_shared/common.yaml            keys every algorithm shares (defines keys)
  defaults/<algo>/config.yaml             algorithm defaults (may define its own algo.* keys)
  the task's defaults.yaml                the task's parameters (defines task.*; its folder, tasks/<folder>/)
  defaults/<algo>/task/<task>/base.yaml   <- <sim>.yaml chain, via `inherits:` (sets keys only)
  KEY=VALUE overrides                 (sets keys only; never coerced: the contract checks the result)

After the key-defining layers the config is put in struct mode, so an owner
file or override naming a key that does not exist fails closed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from soaklab.config.loggers import check_loggers
from soaklab.config.overrides import Override, apply_overrides, parse_overrides, suggest
from soaklab.config.owners import (
    CONF_ROOT,
    SHARED,
    algo_defaults,
    available_algos,
    available_sims,
    available_tasks,
    owner_file,
    task_defaults,
)
from soaklab.config.ranges import check_ranges
from soaklab.contract.removed import check_removed_keys
from soaklab.contract.sections import RunConfig
from soaklab.errors import InvalidInput, SettingError


@dataclass(frozen=True)
class ComposedConfig:
    algo: str
    task: str
    sim: str
    config: dict[str, Any]
    overrides: tuple[Override, ...] = ()
    owner_files: tuple[str, ...] = field(default=())

    @property
    def run(self) -> RunConfig:
        """The composed config as typed values (derived fields as composed: null until resolution)."""
        return RunConfig.of(self.config, self.algo, self.task)

    def get(self, dotted: str) -> Any:
        node: Any = self.config
        for part in dotted.split("."):
            node = node[part]
        return node


def _load(path: Path) -> DictConfig:
    try:
        loaded = OmegaConf.load(path)
    except yaml.MarkedYAMLError as exc:  # the parser's own words and where, on one line
        said = [f"{text}{f', line {mark.line + 1} column {mark.column + 1}' if mark is not None else ''}"
                for text, mark in ((exc.context, exc.context_mark), (exc.problem, exc.problem_mark)) if text]
        raise InvalidInput(f"{path}: cannot load owner YAML ({': '.join(said)})".splitlines()[0]) from None
    except (OSError, OmegaConfBaseException, ValueError, yaml.YAMLError) as exc:
        raise InvalidInput(f"{path}: cannot load owner YAML ({exc})".splitlines()[0]) from None
    if not isinstance(loaded, DictConfig):
        raise InvalidInput(f"{path}: owner YAML must be a mapping")
    return loaded


def _defining(path: Path, section: str, cfg: DictConfig) -> DictConfig:
    """`cfg` with the entry's defaults YAML at `path` merged in: it may define keys under `section`
    (a task's YAML must: `task:`, the mapping of its keys), and set only keys `cfg` has elsewhere."""
    layer = _load(path)
    container = OmegaConf.to_container(layer)
    assert isinstance(container, dict)
    if section == "task" and not isinstance(container.get("task"), dict):
        raise InvalidInput(f"{path}: task: must be a mapping of the task's keys, "
                           f"not {container.get('task')!r}")
    layer_keys = leaf_keys(container)
    check_removed_keys(layer_keys)
    known = leaf_keys(OmegaConf.to_container(cfg))
    for key in layer_keys:
        if key != section and not key.startswith(f"{section}.") and key not in known:
            raise InvalidInput(f"{path}: unknown key {key} (an entry's defaults define {section}.* keys and set "
                               f"the shared ones only){suggest(key, known)}")
    try:
        merged = OmegaConf.merge(cfg, layer)
    except OmegaConfBaseException as exc:
        raise InvalidInput(f"{path}: {exc}".splitlines()[0]) from None
    assert isinstance(merged, DictConfig)
    return merged


def leaf_keys(node: Any, prefix: str = "") -> list[str]:
    """Dotted keys of every leaf (and every mapping) of a plain nested dict."""
    keys: list[str] = []
    if isinstance(node, dict):
        for k, v in node.items():
            dotted = f"{prefix}.{k}" if prefix else str(k)
            keys.append(dotted)
            keys.extend(leaf_keys(v, dotted))
    return keys


def owner_chain(algo: str, task: str, sim: str) -> list[Path]:
    """Owner files for (algo, task, sim), root-most first, following `inherits:`."""
    if algo not in available_algos():
        raise SettingError("--algo", algo, f"must be one of {', '.join(available_algos())}")
    if task not in available_tasks(algo):
        raise SettingError("--task", task, f"must be one of {', '.join(available_tasks(algo))} for --algo {algo}")
    if sim not in available_sims(algo, task):
        raise SettingError("--sim", sim, f"must be one of {', '.join(available_sims(algo, task))} for {algo}/{task}")
    chain: list[Path] = []
    path = owner_file(algo, task, sim)
    if path is None:  # no owner file: the shared defaults and the entries' own (soaklab.config.owners)
        return chain
    while True:
        if path in chain:
            raise InvalidInput(f"{path}: `inherits:` forms a cycle")
        chain.append(path)
        parent = _load(path).get("inherits")
        if parent is None:
            break
        path = path.parent / str(parent)
        if not path.is_file():
            raise InvalidInput(f"{chain[-1]}: inherits missing file {parent}")
    return chain[::-1]


def compose(algo: str, task: str, sim: str, overrides: list[str] | tuple[str, ...] = ()) -> ComposedConfig:
    """Compose the owner config for (algo, task, sim) and apply KEY=VALUE overrides."""
    parsed = parse_overrides(overrides)
    check_removed_keys(o.key for o in parsed)
    chain = owner_chain(algo, task, sim)
    cfg = _load(CONF_ROOT / SHARED / "common.yaml")
    # The entries' defaults define their own section's keys and set the shared ones: checked like an
    # owner file, so a key the contract does not know is named with its file before anything is written.
    for section, path in (("algo", algo_defaults(algo)), ("task", task_defaults(task))):
        if path is not None:
            cfg = _defining(path, section, cfg)
    known = leaf_keys(OmegaConf.to_container(cfg))
    OmegaConf.set_struct(cfg, True)
    cfg.training.sim_backend = sim  # what --sim names; an owner file may say it again, never otherwise
    for path in chain:
        layer = _load(path)
        layer.pop("inherits", None)
        layer_keys = leaf_keys(OmegaConf.to_container(layer))
        check_removed_keys(layer_keys)
        for key in layer_keys:
            if key not in known:
                raise InvalidInput(f"{path}: unknown key {key}{suggest(key, known)}")
        try:
            cfg = OmegaConf.merge(cfg, layer)
        except OmegaConfBaseException as exc:
            raise InvalidInput(f"{path}: {exc}".splitlines()[0]) from None
        assert isinstance(cfg, DictConfig)

    apply_overrides(cfg, parsed, known)
    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    check_ranges(container)  # owner files and overrides alike
    check_loggers(container["training"])
    return ComposedConfig(
        algo=algo,
        task=task,
        sim=sim,
        config=container,
        overrides=tuple(parsed),
        owner_files=tuple(str(p.relative_to(CONF_ROOT)) for p in chain),
    )
