"""The host a run lives on: what machine and software a measurement ran on (info), the environment
variables that steer a run (envvars), and process lifetime ties (lifetime)."""
