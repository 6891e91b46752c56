"""`training.loggers` and `training.wandb_project` fail closed at resolution, in one line naming the
key, before anything is written or spawned: an unknown logger, a list without TensorBoard, a
project name W&B would refuse, and W&B asked for on a host without the package."""

from __future__ import annotations

import subprocess
import sys

import pytest

from soaklab.config.loggers import PROJECT_FORBIDDEN, PROJECT_MAX
from tests.conftest import one_line

OWNER = ("--algo", "sac", "--task", "cartpole_swingup", "--sim", "mujoco")


@pytest.mark.parametrize(("override", "words"), [
    ("training.loggers=[tensorboard,mlflow]", "training.loggers=['tensorboard', 'mlflow']: unknown logger 'mlflow'"),
    ("training.loggers=[wandb]", "training.loggers=['wandb']: must include tensorboard"),
    ("training.loggers=[]", "training.loggers=[]: must include tensorboard"),
    ("training.loggers=[tensorboard,wandb,wandb]", "names a logger twice"),
    ("training.loggers=wandb", "training.loggers='wandb' (str): must be of type list"),
    ("training.loggers=[tensorboard,3]", "must be a list of logger names"),
    ("training.wandb_project=team/soak", "training.wandb_project='team/soak' (str): W&B refuses project names "
                                         "containing /"),
    ("training.wandb_project=a#b?c", "containing # ?"),
    (f"training.wandb_project={'p' * (PROJECT_MAX + 1)}", f"over {PROJECT_MAX} characters"),
    ("training.wandb_project=' '", "must be a non-empty project name"),
])
def test_a_bad_logger_setting_is_one_line_and_exit_2(cli, tmp_path, override, words):
    out = tmp_path / "run_config.json"
    result = cli("config", "resolve", *OWNER, override, "--out", out)
    assert result.code == 2
    assert words in one_line(result.err)
    assert not out.exists()


def test_the_forbidden_characters_are_wandbs_own():
    wandb_settings = pytest.importorskip("wandb").Settings
    for char in PROJECT_FORBIDDEN:
        with pytest.raises(Exception, match="Invalid project name"):
            wandb_settings(project=f"a{char}b")
    with pytest.raises(Exception, match="exceeded 128 characters"):
        wandb_settings(project="p" * (PROJECT_MAX + 1))
    assert wandb_settings(project="p" * PROJECT_MAX).project == "p" * PROJECT_MAX


def test_wandb_without_the_package_is_refused_before_anything_runs(tmp_path):
    # A host without wandb: sitecustomize blocks the installed package the way Python documents
    # (a None in sys.modules: find_spec answers None, import raises ImportError).
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['wandb'] = None\n")
    out, run_dir = tmp_path / "run_config.json", tmp_path / "run"
    env = {"PYTHONPATH": str(hide), "PATH": "/usr/bin:/bin"}
    for args in (("config", "resolve", *OWNER, "training.loggers=[tensorboard,wandb]", "--out", str(out)),
                 ("train", *OWNER, "training.loggers=[tensorboard,wandb]", f"training.log_dir={run_dir}")):
        done = subprocess.run([sys.executable, "-m", "soaklab", *args], env=env, capture_output=True, text=True)
        assert done.returncode == 2, done.stderr
        line = one_line(done.stderr)
        assert "training.loggers=['tensorboard', 'wandb']: wandb is not installed on this host" in line
        assert "pip install 'soaklab[wandb]'" in line
    assert not out.exists() and not run_dir.exists()
