"""The real trainer as a fixture, for readers of a finished run (tests/rl/conftest.py)."""

from tests.rl.conftest import start_train  # noqa: F401
