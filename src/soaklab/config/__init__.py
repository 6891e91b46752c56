"""A run's configuration: the owner YAML (defaults/, package data), its composition (compose),
KEY=VALUE overrides (overrides), the host description (host), the one resolver (resolve) and
run_config.json (run_config). Every value is checked against the settings contract (soaklab.contract,
a leaf below this package and the tasks); docs/settings-contract.md."""
