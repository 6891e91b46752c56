"""Owner YAML composition (compose), KEY=VALUE overrides (overrides) and run_config.json (run_config); DESIGN §4."""
