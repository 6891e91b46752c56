"""The DAG tests' project (a copy of the workflow and a work directory), for a plug-in's run through
the real DAG (test_plugins.py)."""

from tests.workflow.conftest import project  # noqa: F401  (a fixture: pytest finds it by name)
