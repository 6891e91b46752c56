"""G1 motion tracking (the task `g1_motion_tracking`): its env, terms, clip sampling, motion library,
quaternion helpers, its `task:` defaults (defaults.yaml) and its own resolution checks (resolve).
"""
