"""Owner YAML composition, KEY=VALUE overrides and run_config.json (DESIGN §4)."""

from soaklab.config.compose import ComposedConfig, compose
from soaklab.config.overrides import parse_overrides
from soaklab.config.run_config import resolve_run_config, write_run_config

__all__ = ["ComposedConfig", "compose", "parse_overrides", "resolve_run_config", "write_run_config"]
