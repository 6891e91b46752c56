"""A run's configuration: owner YAML composition (compose), KEY=VALUE overrides (overrides), the host
description (host), the one resolver (resolve) and run_config.json (run_config);
docs/settings-contract.md."""
