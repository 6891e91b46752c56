"""Each rule's code inputs (soaklab.dag.codedeps): the package files a CLI command runs, read from the
source, on the real package and on a small package written here."""

from __future__ import annotations

from pathlib import Path

from soaklab.catalogue import ALGORITHMS, BACKENDS, TASKS
from soaklab.dag.codedeps import ROOT, command_sources


def package_files(command: str) -> set[str]:
    return {Path(f).relative_to(ROOT).as_posix() for f in command_sources(command)}


def module_file(reference: str) -> str:
    """"soaklab.a.b:Name" -> "a/b.py" (or "a/b/__init__.py")."""
    parts = reference.partition(":")[0].split(".")[1:]
    plain = Path(*parts).with_suffix(".py")
    return plain.as_posix() if (ROOT / plain).is_file() else (Path(*parts) / "__init__.py").as_posix()


def test_a_train_runs_every_module_the_catalogue_names_and_metrics_none():
    """No module imports an agent, a task builder or a stepper by name: the catalogue names them in
    strings. A command that loads catalogue references (train, evaluate) runs them, so editing one
    replans it; one that never loads them (metrics) is not replanned."""
    fields = ("config", "agent", "builder", "stepper", "resolve", "contract")
    named = {module_file(ref) for entry in (*ALGORITHMS.values(), *TASKS.values(), *BACKENDS.values())
             for ref in (getattr(entry, f, None) for f in fields) if ref}
    assert {"rl/agents/sac.py", "rl/agents/flashsac.py", "sim/mujoco_cpu.py", "sim/mjwarp.py",
            "tasks/cartpole/env.py", "tasks/g1_tracking/library.py"} <= named
    for command in ("train", "evaluate"):
        assert named <= package_files(command), (command, sorted(named - package_files(command)))
    assert not named & package_files("metrics")


def test_only_a_module_importing_a_loader_brings_in_the_references(tmp_path):
    root = tmp_path / "soaklab"
    files = {
        "__init__.py": "",
        "__main__.py": "from soaklab.cli import main\n",
        "catalogue.py": 'ENTRIES = ["soaklab.agent:Agent", "not a reference", "other.pkg:Name"]\n'
                        "def load(reference): ...\nTABLE = {}\n",
        "agent.py": "",
        "builds.py": "from soaklab.catalogue import load\nimport soaklab.config.compose\n",
        "config/__init__.py": "",
        "config/compose.py": "",
        "config/defaults/sac/config.yaml": "algo: {}\n",
        "config/defaults/sac/.config.yaml.swp": "an editor's",
        "reads.py": "from soaklab.catalogue import TABLE\n",
        "cli/__init__.py": "def main(): ...\n",
        "cli/run.py": "def cmd_build():\n    import soaklab.builds\n\ndef cmd_read():\n    import soaklab.reads\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)

    def files_of(command: str) -> set[str]:
        return {Path(f).relative_to(root).as_posix() for f in command_sources(command, root=root)}

    assert {"agent.py", "builds.py", "catalogue.py", "config/defaults/sac/config.yaml"} <= files_of("build")
    assert "config/defaults/sac/.config.yaml.swp" not in files_of("build")  # read by nothing: not code
    assert "agent.py" not in files_of("read") and "catalogue.py" in files_of("read")

