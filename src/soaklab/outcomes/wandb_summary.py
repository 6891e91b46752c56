"""A finished run's outcome written into its W&B run: `soaklab wandb summary`.

Training logs the scalars (soaklab.rl.wandb_sink). What only later DAG steps know (the soak verdict,
the metric window, the validation, the evaluation from the clip's first frame) and the files they
made (the ONNX policy, the play video) are added here, by opening the same W&B run again (its id,
`resume="allow"`). Offline, that opening is a second `offline-run-*` folder with the same id;
`wandb sync` of both folders uploads one run. A W&B failure here never fails the DAG: the record
says the logger stopped and why. A run whose W&B logger stopped during training is not opened again.
"""

from __future__ import annotations

import dataclasses
import html
import os
from pathlib import Path
from typing import Any

from soaklab.errors import InvalidInput
from soaklab.files.jsonfiles import read_json, write_json_atomic
from soaklab.outcomes.runs import run_outcome

ARTIFACT_TYPES = {".onnx": "model", ".mp4": "video", ".png": "image", ".json": "evaluation"}
EVALUATION_FIGURES = ("success_rate", "tracked_fraction", "mpkpe_m", "root_relative_mpkpe_m", "joint_error_rad")


def _read(path: Path, what: str) -> dict[str, Any]:
    try:
        value = read_json(path)
    except OSError as exc:
        raise InvalidInput(f"{what} {path}: cannot read it ({exc.strerror or exc})") from None
    if not isinstance(value, dict):
        raise InvalidInput(f"{path}: expected a JSON object")
    return value


TRAINING_FIGURES = ("status", "stop_reason", "failure_reason", "completed_iterations", "total_env_steps",
                    "final_env_steps_per_sec", "training_wall_time_sec")


def training_wandb(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's W&B logger as training left it (run_summary.json's `loggers.wandb`), and the
    training's own figures as `train/<name>`."""
    summary = _read(run_dir / "run_summary.json", "run dir")
    state = (summary.get("loggers") or {}).get("wandb")
    if not isinstance(state, dict):
        raise InvalidInput(f"{run_dir}: the run did not log to W&B (training.loggers has no wandb)")
    return state, {f"train/{name}": summary[name] for name in TRAINING_FIGURES if summary.get(name) is not None}


def run_id_of(folder: str) -> str:
    """W&B names a run's folder `[offline-]run-<date>_<time>-<id>`."""
    name = Path(folder).name
    if not name.startswith(("run-", "offline-run-")) or name.count("-") < 2:
        raise InvalidInput(f"{folder}: not a W&B run folder (expected [offline-]run-<date>_<time>-<id>)")
    return name.rsplit("-", 1)[1]


def evaluation_summary(paths: list[Path]) -> dict[str, float]:
    """`evaluation/<sim>/<clip>/<figure>` for each evaluation JSON (soaklab evaluate)."""
    out: dict[str, float] = {}
    for path in paths:
        record = _read(path, "--evaluation")
        sim = str(record.get("sim"))
        for clip, figures in (record.get("clips") or {}).items():
            for name in EVALUATION_FIGURES:
                value = (figures or {}).get(name)
                if isinstance(value, int | float):
                    out[f"evaluation/{sim}/{clip}/{name}"] = float(value)
    return out


def outcome_summary(run: str, results: Path, logs: Path) -> dict[str, Any]:
    """The DAG's verdict and headline figures of the run, as `soaklab summary` reads them."""
    outcome = dataclasses.asdict(run_outcome(run, results, logs))
    return {f"soaklab/{key}": value for key, value in outcome.items() if value is not None and key != "run"}


def write_summary(run_dir: Path, run: str, results: Path | None, logs: Path | None, evaluations: list[Path],
                  artifacts: list[Path], out: Path, page: Path | None) -> dict[str, Any]:
    """Outside the DAG (no results and logs of a workflow run) the summary has the evaluation only."""
    if (results is None) != (logs is None):
        raise InvalidInput("--results and --logs: give both (a workflow run's folders) or neither")
    for path in artifacts:
        if not path.is_file():
            raise InvalidInput(f"--artifact {path}: no such file")
    state, trained = training_wandb(run_dir)
    config = _read(run_dir / "run_config.json", "run dir")
    project = ((config.get("config") or {}).get("training") or {}).get("wandb_project")
    folder = state.get("run_folder")
    outcome = outcome_summary(run, results, logs) if results is not None and logs is not None else {}
    summary = {**trained, **outcome, **evaluation_summary(evaluations)}
    record: dict[str, Any] = {"run": run, "project": project, "mode": state.get("mode"),
                              "folders": [folder] if folder else [], "summary": summary,
                              "artifacts": [str(p) for p in artifacts], "state": "ok", "reason": None}
    if state.get("state") != "ok" or not folder:
        record.update(state="stopped", reason=f"the W&B logger stopped during training: {state.get('reason')}")
    else:
        record["run_id"] = run_id_of(folder)
        try:
            record["folders"].append(_resume_and_write(record, Path(folder), summary, artifacts))
        except Exception as exc:  # W&B failing here must not fail the run's DAG
            record.update(state="stopped", reason=f"{type(exc).__name__}: {exc}".splitlines()[0])
    record["sync"] = "wandb sync " + " ".join(record["folders"]) if record["folders"] else None
    write_json_atomic(out, record)
    if page is not None:
        page.write_text(_page(record))
    return record


def _resume_and_write(record: dict[str, Any], folder: Path, summary: dict[str, Any], artifacts: list[Path]) -> str:
    """Open the training's W&B run again, add the summary and the files; the new folder."""
    import wandb

    mode = os.environ.get("WANDB_MODE") or record["mode"] or "offline"
    # The folder is <dir>/wandb/<run folder>: the same <dir> keeps both folders side by side.
    run = wandb.init(id=record["run_id"], resume="allow", project=record["project"], dir=str(folder.parent.parent),
                     mode=mode, reinit="create_new", settings=wandb.Settings(console="off", silent=True))
    try:
        run.summary.update(summary)
        for path in artifacts:
            artifact = wandb.Artifact(f"{record['run']}-{path.stem}".replace("/", "_"),
                                      type=ARTIFACT_TYPES.get(path.suffix, "file"))
            artifact.add_file(str(path))
            run.log_artifact(artifact)
        return str(Path(run.dir).parent)
    finally:
        run.finish()


def _page(record: dict[str, Any]) -> str:
    rows = "".join(f"<li><code>{html.escape(f)}</code></li>" for f in record["folders"])
    sync = html.escape(record["sync"] or "nothing to sync")
    state = html.escape(record["state"] + (f": {record['reason']}" if record["reason"] else ""))
    return (f"<html><body><h2>W&amp;B run of {html.escape(record['run'])}</h2>"
            f"<p>project <code>{html.escape(str(record['project']))}</code>, mode {html.escape(str(record['mode']))},"
            f" logger {state}</p><p>folders:</p><ul>{rows}</ul><p>upload: <code>{sync}</code></p></body></html>\n")
