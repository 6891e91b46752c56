"""`soaklab soak`: run the real trainer in its own session and watch it until it ends (docs/soak.md).

The monitor never trusts the trainer to report its own health: it samples the
process tree, memory, file descriptors and run-dir changes itself, enforces the
start-up, stale-progress and minimum-duration limits, ends the trainer's whole
process group when it must (TERM, then KILL), lists whatever outlives the grace
period, and writes one soak JSON (schema 0.3.0) whatever happened.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from soaklab.config.host import probe_host
from soaklab.config.run_config import ResolvedRun
from soaklab.errors import REQUEUE_EXIT, InvalidInput
from soaklab.files.jsonfiles import read_json, write_json_atomic
from soaklab.files.rundir import RUN_CONFIG
from soaklab.host.lifetime import CANCEL_SIGNALS, die_with_parent
from soaklab.host.run_code import sources_sha256
from soaklab.schemas import schema_errors
from soaklab.soak import gpu
from soaklab.soak.context import soak_context
from soaklab.soak.criteria import failed, run_summary_checks
from soaklab.soak.interrupted import adopt_interrupted, earlier_segments, keep_interrupted
from soaklab.soak.leak import leak_verdict
from soaklab.soak.request import SoakRequest, check_extra_overrides, check_outputs
from soaklab.soak.sampler import FD_CLASSES, ProcessKey, remove_shm, session_members, take_sample

SOAK_SCHEMA_VERSION = "0.3.0"
TRAINER_CLASSIFICATIONS = ("normal_completion", "learner_failure", "collector_failure", "backend_worker_failure",
                           "external_cancellation", "unknown_failure", "non_finite", "diverged")
TERM_WAIT_S = 15.0  # the trainer's own shutdown (collector join, final checkpoint) gets this long
PRINT_EVERY_S = 10.0


@dataclass
class Watch:
    """What the monitor has seen so far; mutated only by the sampling loop."""

    started_at: float
    samples: list[dict[str, Any]] = field(default_factory=list)
    seen: dict[ProcessKey, dict[str, Any]] = field(default_factory=dict)
    last_change: float = 0.0
    last_fingerprint: tuple[Any, ...] | None = None
    first_progress_s: float | None = None
    shm_seen: set[str] = field(default_factory=set)  # /dev/shm entries the trainer's processes used
    shm_removed: list[dict[str, Any]] = field(default_factory=list)  # those still there at the end
    termination: dict[str, Any] | None = None  # why and how the monitor ended the trainer


class SoakCancelled(BaseException):
    """SIGTERM/SIGINT to the monitor; a BaseException so no `except Exception` swallows it."""


def resolve_request(request: SoakRequest) -> ResolvedRun:
    """Everything the trainer would refuse, refused here first: nothing is spawned on bad input.

    A run config is loaded (checked again only where this host matters); only a soak that changes it
    (--extra-override) or has none resolves. The host is described without a CUDA context."""
    from soaklab.config.resolve import Pin, RunSource, obtain
    from soaklab.mps.client import select_for_run

    check_extra_overrides(list(request.extra_overrides))
    check_outputs(request)
    pins = tuple(Pin(flag, key, value) for flag, key, value in (
        ("--num-envs", "algo.num_envs", request.num_envs),
        ("--iterations", "algo.max_iterations", request.iterations)) if value is not None)
    source = RunSource(request.run_config, request.algo, request.task, request.sim, request.extra_overrides,
                       pins=pins, log_dir=request.log_dir)
    # The daemon must exist now; the trainer selects (and uses) it itself.
    return select_for_run(obtain(source, probe_host(cuda_context=False)), apply=False)


def resume_command(request: SoakRequest) -> list[str]:
    """The trainer of an adopted interrupted run (soaklab.soak.interrupted): its run dir, resumed."""
    return [sys.executable, "-m", "soaklab", "train", "--resume", str(request.log_dir), "--skip-post-training"]


def trainer_command(request: SoakRequest) -> list[str]:
    """The trainer loads the record the monitor wrote into its run dir: one resolution per soak. A soak
    proves the runtime: no export or playback after it (`snakemake play` makes both)."""
    return [sys.executable, "-m", "soaklab", "train", "--run-config", str(request.log_dir / RUN_CONFIG),
            "--skip-post-training"]


class Monitor:
    def __init__(self, request: SoakRequest, resolved: ResolvedRun, argv: list[str],
                 numerics: dict[str, Any] | None = None) -> None:
        self.numerics = numerics  # the numerics profile the trainer runs under, as applied (soaklab.host.numerics)
        self.request = request
        self.resolved = resolved
        self.argv = argv
        self.budget = request.budget
        self.command = trainer_command(request)
        self.proc: subprocess.Popen[bytes] | None = None
        self.write_errors: list[str] = []  # soak JSON / evidence writes that failed (one line each)
        self.with_gpu = gpu.gpu_identity() is not None
        self.watch = Watch(started_at=time.monotonic())
        self.resumed_at: int | None = None  # the iteration an adopted interrupted run resumes at
        self.kept_interrupted: Path | None = None  # where a failed, resumable run was moved (soak.interrupted)

    def requeue(self) -> bool:
        """The trainer checkpointed at a signal and asked to be run again (soaklab.rl.cancel), and its
        run is kept for the next soak: the soak's exit code says so too, for a scheduler's requeue."""
        return (self.kept_interrupted is not None and self.proc is not None
                and self.proc.returncode == REQUEUE_EXIT)

    # -- watching ----------------------------------------------------------------------------------
    def _elapsed(self) -> float:
        return time.monotonic() - self.watch.started_at

    def _sample(self) -> dict[str, Any]:
        assert self.proc is not None
        sample = take_sample(self.proc.pid, self.request.log_dir, self._elapsed(), self.with_gpu,
                             self.watch.shm_seen)
        w = self.watch
        for entry in sample["processes"]:
            w.seen.setdefault(ProcessKey(entry["pid"], entry["create_time"]), {"name": entry["name"]})
        progress = sample["progress"]
        fingerprint = (progress["files"], progress["bytes"], progress["newest_mtime"])
        if fingerprint != w.last_fingerprint:
            w.last_fingerprint, w.last_change = fingerprint, time.monotonic()
        if w.first_progress_s is None and progress["iteration"] is not None:
            w.first_progress_s = sample["elapsed_s"]
        w.samples.append(sample)
        return sample

    def _limit_reached(self) -> str | None:
        w, b = self.watch, self.budget
        if w.first_progress_s is None:
            if self._elapsed() > b.startup_timeout:
                return "timeout/startup"
        elif time.monotonic() - w.last_change > b.stale_progress:
            return "timeout/stale_tick"
        return None

    def _print(self, sample: dict[str, Any]) -> None:
        """One progress line: where the run is, how fast, when it ends, what it holds."""
        p, total = sample["progress"], self.resolved.run.algo.max_iterations
        rate = eta = "-"
        earlier = next((s for s in self.watch.samples if s["progress"]["env_steps"] is not None), None)
        if p["env_steps"] is not None and earlier is not None and sample["elapsed_s"] > earlier["elapsed_s"]:
            span = sample["elapsed_s"] - earlier["elapsed_s"]
            steps = p["env_steps"] - earlier["progress"]["env_steps"]
            iterations = p["iteration"] - earlier["progress"]["iteration"]
            rate = f"{steps / span:,.0f} env-steps/s"
            if iterations > 0:
                eta = f"ETA {(total - p['iteration']) * span / iterations:.0f}s"
        it = "-" if p["iteration"] is None else p["iteration"]
        print(f"soak: {sample['elapsed_s']:.0f}s | it {it}/{total} | {rate} | {eta}"
              f" | procs {sample['process_count']} | rss {sample['rss_bytes'] / (1 << 20):,.0f} MiB"
              f" | shm fds {sample['fds']['shared_memory']}", flush=True)

    def _loop(self) -> None:
        assert self.proc is not None
        last_print = -PRINT_EVERY_S
        self.watch.last_change = time.monotonic()
        while True:
            sample = self._sample()
            if sample["elapsed_s"] - last_print >= PRINT_EVERY_S:
                self._print(sample)
                last_print = sample["elapsed_s"]
            if self.proc.poll() is not None:
                return
            reason = self._limit_reached()
            if reason is not None:
                self._terminate(reason)
                return
            try:
                self.proc.wait(timeout=self.budget.sample_interval)
            except subprocess.TimeoutExpired:
                continue

    # -- ending it ---------------------------------------------------------------------------------
    def _terminate(self, reason: str) -> None:
        """TERM to the trainer's process group, KILL what is left after TERM_WAIT_S."""
        detected_s = round(self._elapsed(), 3)
        sent: list[str] = []
        for sig, wait_s in ((signal.SIGTERM, TERM_WAIT_S), (signal.SIGKILL, 5.0)):
            if self.proc is None or self.proc.poll() is not None:
                break
            try:
                os.killpg(self.proc.pid, sig)
                sent.append(sig.name)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                continue
        self.watch.termination = {"reason": reason, "signals_sent": sent, "detected_at_s": detected_s,
                                  "ended_at_s": round(self._elapsed(), 3)}
        print(f"soak: {reason}: ended the trainer's process group ({', '.join(sent) or 'already gone'})", flush=True)

    def _residual_processes(self) -> list[dict[str, Any]]:
        """Everything the trainer started that outlived the grace period; then the monitor ends them."""
        assert self.proc is not None
        time.sleep(self.budget.post_shutdown_grace)
        found: dict[ProcessKey, psutil.Process] = {}
        for key in self.watch.seen:
            if key.pid != self.proc.pid and key.alive():
                found[key] = psutil.Process(key.pid)
        for proc in session_members(self.proc.pid):
            try:
                found.setdefault(ProcessKey(proc.pid, proc.create_time()), proc)
            except psutil.Error:
                continue
        residual = []
        for key, proc in sorted(found.items(), key=lambda kv: kv[0].pid):
            try:
                cmdline = proc.cmdline()
            except psutil.Error:
                cmdline = []
            residual.append({"pid": key.pid, "create_time": key.create_time,
                             "name": self.watch.seen.get(key, {}).get("name") or proc.name(),
                             "cmdline": cmdline, "killed_by_monitor": _kill(proc)})
        return residual

    # -- the soak ----------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        request = self.request
        composed = self.resolved.composed
        adoption = adopt_interrupted(request.log_dir, self.resolved.record()["config_hash"],
                                     sources_sha256(composed.algo, composed.task, composed.sim))
        self.resumed_at = adoption.resumed_at
        for note in adoption.notes:
            print(f"soak: {note}", flush=True)
        if self.resumed_at is not None:
            earlier = request.console_log.with_name(f"soak-console-before-{self.resumed_at}.log")
            if request.console_log.exists():
                request.console_log.rename(earlier)
            # The killed segment's last progress is not this trainer's: left in place, it would pass
            # for this segment's first iteration (start-up then counts as growth in the leak window,
            # and the start-up limit as met before the trainer has run at all).
            (request.log_dir / "progress.json").unlink(missing_ok=True)
            self.command = resume_command(request)
            print(f"soak: resuming the interrupted run {request.log_dir} at iteration {self.resumed_at}", flush=True)
        request.log_dir.mkdir(parents=True, exist_ok=True)
        # The claim on the log dir: its console log, created exclusively. A second soak aimed at the
        # same dir (however close in time its checks ran) stops here, before touching anything.
        try:
            console = open(request.console_log, "xb")  # noqa: SIM115 - closed once the trainer is spawned
        except FileExistsError:
            raise InvalidInput(f"--log-dir {request.log_dir}: in use by another soak; choose a new directory") from None
        previous = {s: signal.signal(s, _raise_cancelled) for s in CANCEL_SIGNALS}
        residual: list[dict[str, Any]] = []
        monitor_error: str | None = None
        try:
            with console:
                write_json_atomic(request.log_dir / RUN_CONFIG, self.resolved.record())
                print(f"soak: config {self.resolved.origin}", flush=True)
                env = dict(os.environ, PYTHONUNBUFFERED="1")
                print(f"soak: $ {' '.join(self.command)}", flush=True)
                # Its own session (the monitor ends its whole group), but tied to the monitor: if the
                # monitor dies by any signal, SIGKILL included, the trainer gets SIGTERM and shuts down.
                self.proc = subprocess.Popen(self.command, stdout=console, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, start_new_session=True, env=env,
                                             preexec_fn=die_with_parent(signal.SIGTERM))
            self.watch.started_at = time.monotonic()
            self._loop()
        except SoakCancelled as exc:
            for s in previous:  # one cancellation is enough; the group is ended exactly once
                signal.signal(s, signal.SIG_IGN)
            self._terminate("external_cancellation")
            assert self.watch.termination is not None
            self.watch.termination["signal"] = str(exc)
        except Exception as exc:  # the monitor's own failure still ends the trainer and leaves evidence
            monitor_error = f"{type(exc).__name__}: {exc}"
            if self.proc is not None:
                self._terminate("monitor_failure")
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
        ended_s = self._elapsed()
        if self.proc is not None:
            residual = self._residual_processes()
            # Whatever killed the trainer (a group SIGKILL also kills multiprocessing's resource
            # tracker), nothing of it may stay in /dev/shm: every entry it used and left is removed here.
            self.watch.shm_removed = remove_shm(self.watch.shm_seen)
        soak = self._soak_json(ended_s, residual, monitor_error)
        # A full disk (or a vanished directory) costs the file, never the verdict or the evidence copy.
        for what, write in (("--output", lambda: write_json_atomic(request.output, soak)),
                            ("--evidence-dir", lambda: copy_evidence(request, soak) if request.evidence_dir else None)):
            try:
                write()
            except OSError as exc:
                self.write_errors.append(f"{what}: cannot write {exc.filename or ''}: {exc.strerror or exc}")
                print(f"soak: error: {self.write_errors[-1]}", file=sys.stderr, flush=True)
        if soak["status"] != "passed" and self.proc is not None:
            try:
                kept = keep_interrupted(request.log_dir, soak, self.resolved.record()["config_hash"],
                                        resumed=self.resumed_at is not None)
            except OSError as exc:  # the verdict and its evidence are written already; the run stays in place
                print(f"soak: error: could not keep the interrupted run {request.log_dir}: {exc}", file=sys.stderr,
                      flush=True)
                kept = None
            if kept is not None:
                # Only a run the next soak adopts is worth a scheduler's requeue.
                self.kept_interrupted = kept.path if kept.adoptable else None
                print(f"soak: {kept.note}", flush=True)
        return soak

    def _soak_json(self, duration_s: float, residual: list[dict[str, Any]], monitor_error: str | None
                   ) -> dict[str, Any]:
        summary, summary_problem = read_run_summary(self.request.log_dir)
        verdict = leak_verdict(self.watch.samples, after_iteration=self.resumed_at or 0)
        returncode = self.proc.returncode if self.proc is not None else None
        earlier = earlier_segments(self.request.log_dir)
        # The minimum duration is the run's, not each segment's: a soak killed twice still ran as long
        # as its segments together (the leak verdict, by contrast, is each segment's own).
        run_duration_s = duration_s + sum(seg["duration_s"] or 0.0 for seg in earlier)
        classification, reason = self._classify(summary, summary_problem, returncode, residual, verdict,
                                                run_duration_s, monitor_error)
        soak: dict[str, Any] = {
            "schema_version": SOAK_SCHEMA_VERSION,
            "status": "passed" if classification is None else "failed",
            "failure_reason": reason,
            "failure_classification": classification,
            "command": {"monitor": ["soaklab", *self.argv], "trainer": self.command},
            "run_dir": str(self.request.log_dir),
            "console_log": str(self.request.console_log),
            "context": soak_context(self.resolved, self.numerics),
            "monitor": {**self.budget.record(), "gpu_sampling": self.with_gpu},
            "duration_s": round(duration_s, 3),
            "first_progress_s": self.watch.first_progress_s,
            "samples": self.watch.samples,
            "resource_summary": resource_summary(self.watch.samples, summary, verdict),
            "shutdown": {
                "trainer_pid": self.proc.pid if self.proc is not None else None,
                "trainer_returncode": returncode,
                "trainer_signal": signal.Signals(-returncode).name if returncode is not None and returncode < 0
                else None,
                "terminated_by_monitor": self.watch.termination,
                "classification": (summary or {}).get("runtime_manifest", {}).get("shutdown", {}).get(
                    "classification"),
            },
            "post_shutdown": {"grace_seconds": self.budget.post_shutdown_grace, "residual_processes": residual,
                              "shm_removed": self.watch.shm_removed},
            "run_summary": summary,
            # One per trainer start: the interrupted ones' verdicts, then this one's (docs/soak.md).
            "segments": [*earlier,
                         {"status": "passed" if classification is None else "failed",
                          "failure_classification": classification, "failure_reason": reason,
                          "duration_s": round(duration_s, 3), "leak": verdict["leak"],
                          "completed_iterations": (summary or {}).get("completed_iterations")}],
        }
        errors = schema_errors("soak", soak)
        if errors:  # still written: the evidence matters more than the shape
            soak.update(status="failed", failure_classification="schema_violation",
                        failure_reason=f"soak JSON violates its schema: {errors[0]}")
        return soak

    def _classify(self, summary: dict[str, Any] | None, summary_problem: str | None, returncode: int | None,
                  residual: list[dict[str, Any]], verdict: dict[str, Any], run_duration_s: float,
                  monitor_error: str | None) -> tuple[str | None, str | None]:
        """The first failure in order of cause: the monitor's own verdicts, then the trainer's."""
        if monitor_error is not None:
            return "monitor_failure", monitor_error
        term = self.watch.termination
        if term is not None:
            limits = {"timeout/startup": f"no progress.json within {self.budget.startup_timeout:g}s",
                      "timeout/stale_tick": f"no file in the run dir changed for {self.budget.stale_progress:g}s",
                      "external_cancellation": f"the monitor received {term.get('signal')}"}
            return term["reason"], limits.get(term["reason"], term["reason"])
        if summary is None:
            refusal = refusal_line(self.request.console_log) if returncode == 2 else None
            if refusal is not None:  # refused before it ran: its one line is the cause
                return "trainer_refused", f"the trainer refused the run (exit 2): {refusal}"
            kind = "missing_run_summary" if summary_problem == "missing" else "invalid_run_summary"
            return kind, f"run_summary.json: {summary_problem} (trainer exit code {returncode})"
        trainer = summary["runtime_manifest"]["shutdown"]["classification"]
        if summary["status"] != "completed":
            kind = trainer if trainer in TRAINER_CLASSIFICATIONS and trainer != "normal_completion" \
                else "unknown_failure"
            return kind, summary["failure_reason"] or trainer
        bad = failed(run_summary_checks(summary, self.resolved.run.algo.num_envs))
        if bad or returncode != 0:
            what = f"{bad[0].name}: expected {bad[0].expected!r}, got {bad[0].actual!r}" if bad \
                else f"trainer exit code {returncode} with a completed run summary"
            return "shutdown_contract_violation", what
        if residual:
            return "resource_leak", f"processes alive after the grace period: {[p['pid'] for p in residual]}"
        if self.watch.shm_removed:
            names = [e["name"] for e in self.watch.shm_removed]
            return "resource_leak", f"/dev/shm entries left by the trainer (removed by the monitor): {names}"
        if verdict["leak"]:
            return "resource_leak", f"sustained growth beyond its bound: {', '.join(verdict['leaking'])}"
        if run_duration_s < self.budget.min_duration:
            return "min_duration_not_met", (f"the run ended after {run_duration_s:.1f}s (all its segments), before "
                                            f"the minimum {self.budget.min_duration:g}s; raise --iterations")
        return None, None


def _raise_cancelled(signum: int, _frame: Any) -> None:
    raise SoakCancelled(signal.Signals(signum).name)


def _kill(proc: psutil.Process) -> bool:
    try:
        proc.kill()
        proc.wait(timeout=5)
        return True
    except psutil.Error:
        return False


def refusal_line(console_log: Path) -> str | None:
    """The trainer's own one-line refusal (`soaklab: error: ...`) from its console log, if any."""
    try:
        lines = console_log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    errors = [line.strip() for line in lines if line.startswith("soaklab: error:")]
    return errors[-1][len("soaklab: error:"):].strip() if errors else None


def read_run_summary(run_dir: Path) -> tuple[dict[str, Any] | None, str | None]:

    path = run_dir / "run_summary.json"
    if not path.is_file():
        return None, "missing"
    try:
        summary = read_json(path)
    except (OSError, ValueError) as exc:
        return None, f"unreadable ({exc})"
    errors = schema_errors("run_summary", summary)
    if errors:
        return None, f"violates its schema ({errors[0]})"
    return summary, None


def resource_summary(samples: list[dict[str, Any]], summary: dict[str, Any] | None,
                     verdict: dict[str, Any]) -> dict[str, Any]:
    def peak(get: Any) -> float | None:
        values = [v for s in samples if (v := get(s)) is not None]
        return max(values) if values else None

    manifest = (summary or {}).get("runtime_manifest", {})
    flight, ingress = manifest.get("inference_flight", {}), manifest.get("replay_ingress", {})
    return {
        "samples": len(samples),
        "peaks": {
            "process_count": peak(lambda s: s["process_count"]),
            "rss_bytes": peak(lambda s: s["rss_bytes"]),
            "gpu_memory_bytes": peak(lambda s: s["gpu_memory_bytes"]),
            **{f"fds.{cls}": peak(lambda s, c=cls: s["fds"][c]) for cls in FD_CLASSES},
            "replay_high_water_occupancy": ingress.get("high_water_occupancy"),
            "inference_events": flight.get("ticks_published"),
            "max_in_flight": flight.get("max_in_flight"),
        },
        "leak_verdict": verdict,
    }


def copy_evidence(request: SoakRequest, soak: dict[str, Any]) -> None:
    """The soak JSON, console log and the run's own records, where a failed DAG job keeps them."""
    dest = request.evidence_dir
    assert dest is not None
    dest.mkdir(parents=True, exist_ok=True)
    write_json_atomic(dest / "soak.json", soak)
    for path in (request.console_log, *(request.log_dir / n for n in ("run_summary.json", "run_config.json",
                                                                        "progress.json"))):
        if path.is_file():
            shutil.copy2(path, dest / path.name)
