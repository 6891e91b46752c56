"""Cart-pole swing-up (the task `cartpole_swingup`): its env and its `task:` defaults (defaults.yaml)."""
