"""The collector process: owns the env, never the actor (docs/runtime.md).

Spawned by the learner. It publishes observations into the inference ring,
steps its group of envs with the actions the learner answers, and publishes
every transition through replay ingress. It ignores SIGINT (the learner
handles Ctrl-C) and exits when the learner dies (parent-death signal, and a
parent check in every wait).
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch

from soaklab.contract.sections import RunConfig
from soaklab.files.checkpoints import collector_path, load_weights
from soaklab.files.jsonfiles import write_json_atomic
from soaklab.host import determinism
from soaklab.host.lifetime import dump_stacks_on_signal, leave, set_parent_death_signal
from soaklab.rl.channels import C, ChannelHandles, Stopped, bump_max, wait
from soaklab.rl.faults import Fault
from soaklab.rl.finite import FiniteWatch, NonFinite
from soaklab.rl.resume import save_atomic
from soaklab.rl.shm import SharedArrays
from soaklab.rl.timing import PhaseTimer
from soaklab.rl.trace import Trace, flatten, trace_from_env
from soaklab.rl.transport import make_transport
from soaklab.tasks.env import EnvSpec, StepResult
from soaklab.tasks.registry import step_metrics


def checked_step(actions: torch.Tensor, result: StepResult) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """What the collector checks for finiteness each step, by name, and the reward terms apart."""
    return ({"action": actions, "observation": result.obs, "critic observation": result.critic_obs,
             "next observation": result.final_obs, "next critic observation": result.final_critic_obs,
             "reward": result.reward}, result.reward_terms)


@dataclass(frozen=True)
class CollectorSpec:
    handles: ChannelHandles
    task: str
    run: RunConfig
    scene: str | dict[str, str] | None  # one scene, or each clip path's (a motion library)
    vector_steps: int
    metrics_interval: int
    metric_names: tuple[str, ...]  # soaklab.tasks.registry.collector_metrics
    torch_threads: int
    parent_pid: int
    fault: Fault | None
    diagnostics_path: str  # where the backend's diagnostics go (rank 0: the run dir; others: a temp file)
    non_finite_path: str  # where the first non-finite value is reported (soaklab.rl.collector_process.non_finite_path)
    # Resumable checkpoints (soaklab.rl.resume): the run dir this collector saves its state into
    # every `save_interval` vector steps (None: it saves none), and the state it starts from.
    run_dir: str | None = None
    save_interval: int = 0
    resume_from: str | None = None
    trace_run_dir: str | None = None  # SOAKLAB_TRACE: the run dir whose trace/ this collector writes into


def collector_main(spec: CollectorSpec) -> None:
    # The collector's end is the learner's to decide: a signal to the whole group (the monitor's, a
    # scheduler's preemption) reaches the learner, which first checkpoints with this process's help
    # (soaklab.rl.cancel), then stops it. A learner gone takes it along (the parent-death SIGKILL).
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    set_parent_death_signal(signal.SIGKILL, spec.parent_pid)
    dump_stacks_on_signal()
    torch.set_num_threads(spec.torch_threads)
    if spec.run.training.deterministic:  # before the env's first kernel (docs/determinism.md)
        determinism.enter(spec.run.env.seed)
    arrays = SharedArrays(spec.handles.specs, create=False)
    code = 0
    try:
        # Built and run under its stream (None: the current one), so the env's backend takes its priority.
        with torch.cuda.stream(collector_stream(spec.run)):
            Collector(spec, arrays).run()  # not kept: its references to the CUDA ring go with it
    except Stopped:
        arrays["control"][C.STOP_RETURNS] += 1
    except NonFinite as exc:  # the learner names it (its run summary) from this report
        exc.write(Path(spec.non_finite_path))
        print(f"collector: {exc}", file=sys.stderr, flush=True)
        code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        release_cuda_ring(spec)
        stop_compile_workers()
        arrays.close()
    leave(code)


def collector_stream(run: RunConfig) -> torch.cuda.Stream | None:
    """training.collector_stream_priority=high on a CUDA carrier: a stream of the GPU's highest
    priority, so the env step's kernels are scheduled ahead of the learner's update wherever both
    wait for the same multiprocessors (the learner's stream keeps the default, lowest, priority)."""
    device = run.env.collector_tensor_device or "cpu"
    if run.training.collector_stream_priority != "high" or not device.startswith("cuda"):
        return None
    # torch maps a priority beyond the device's range to its nearest end: the highest.
    return torch.cuda.Stream(torch.device(device), priority=-100)


def stop_compile_workers() -> None:
    """Shut torch.compile's worker pool (a process per core on big hosts) down here: os._exit skips
    the pool's own exit hook, leaving its sidecar to notice on its own that the collector is gone."""
    async_compile = sys.modules.get("torch._inductor.async_compile")
    shutdown = getattr(async_compile, "shutdown_compile_workers", None)
    if shutdown is not None:
        try:
            shutdown()
        except Exception:
            traceback.print_exc()


def release_cuda_ring(spec: CollectorSpec) -> None:
    """Drop this process's CUDA IPC references before exiting: os._exit skips destructors, and the
    learner counts every reference a consumer still holds as a tensor it may not free."""
    if spec.handles.cuda_ring is None:
        return
    torch.cuda.synchronize()
    object.__setattr__(spec.handles, "cuda_ring", None)  # the frozen spec is this process's only holder
    gc.collect()


class Collector:
    def __init__(self, spec: CollectorSpec, arrays: SharedArrays) -> None:
        from soaklab.tasks.registry import make_env

        self.spec, self.h, self.layout = spec, spec.handles, spec.handles.layout
        self.ctl = arrays["control"]
        self.ingress_rows, self.metrics = arrays["ingress_rows"], arrays["metrics"]
        self.transport = make_transport(self.h.cuda_ring if self.h.cuda_ring is not None else arrays)
        if self.transport.device.type == "cuda":
            torch.cuda.set_device(self.transport.device)
        self.bounds = self.layout.group_bounds
        # The env's tensors live on the resolved carrier (a device-resident sim: the learner's GPU).
        device = spec.run.env.collector_tensor_device or "cpu"
        scene = Path(spec.scene) if isinstance(spec.scene, str) else spec.scene  # a library: per clip
        envs = EnvSpec.of(spec.run, device)
        self.envs = [make_env(spec.run, envs.group(b - a, g), scene) for g, (a, b) in enumerate(self.bounds)]
        self.write_diagnostics()
        self.env_device = self.envs[0].device
        self.timer = PhaseTimer(self.env_device)
        self.rows = self.layout.row_slices()
        # Transitions are staged where the carrier lives, then published chunk by chunk.
        self.staging = torch.zeros(self.layout.num_envs, self.layout.row_width, device=self.transport.device)
        self.term_sums = torch.zeros(len(spec.metric_names), dtype=torch.float64, device=self.env_device)
        self.term_count = 0
        self.watch = FiniteWatch(self.env_device)
        self.trace: Trace | None = trace_from_env(spec.trace_run_dir, "collector")

    def write_diagnostics(self) -> None:
        """Once built, and again at the end, when the task's step graphs (captured after their warm-up
        calls) say whether they held: a build-time file can only say "not captured yet"."""
        write_json_atomic(Path(self.spec.diagnostics_path), self.envs[0].diagnostics())

    def parent_alive(self) -> bool:
        return os.getppid() == self.spec.parent_pid

    def publish_obs(self, g: int, obs: torch.Tensor, dones: torch.Tensor) -> None:
        self.transport.put_obs(g, obs, dones)
        ctl = self.ctl
        ctl[C.TICKS_PUBLISHED] += 1
        bump_max(ctl, C.MAX_IN_FLIGHT, int(ctl[C.TICKS_PUBLISHED] - ctl[C.TICKS_ANSWERED]))
        self.h.obs_ready[g].release()

    def publish_vector(self) -> None:
        """Publish the staged vector as ceil(N / slot_rows) chunks, waiting on backpressure."""
        ctl, depth, rows = self.ctl, self.layout.depth, self.layout.slot_rows
        for start in range(0, self.layout.num_envs, rows):
            chunk = self.staging[start:start + rows]
            if not self.h.ingress_free.acquire(block=False):
                ctl[C.BACKPRESSURE_WAITS] += 1
                t0 = time.perf_counter_ns()
                try:
                    wait(self.h.ingress_free, ctl, self.parent_alive)
                except Stopped:
                    ctl[C.EARLY_RETURNS] += 1  # a partial vector is never published
                    raise
                finally:
                    ctl[C.BACKPRESSURE_WAIT_NS] += time.perf_counter_ns() - t0
            slot = int(ctl[C.INGRESS_PUBLISHED] % depth)
            with self.timer.span("ingress_write"):
                self.transport.put_chunk(slot, chunk)
            self.ingress_rows[slot] = len(chunk)
            ctl[C.INGRESS_PUBLISHED] += 1
            bump_max(ctl, C.HIGH_WATER, int(ctl[C.INGRESS_PUBLISHED] - ctl[C.INGRESS_RELEASED]))
            self.h.ingress_filled.release()

    def write_metrics(self) -> None:
        self.watch.drain()  # a GPU's finiteness flags are read here, with the metrics
        if self.term_count:
            self.metrics[: len(self.term_sums)] = (self.term_sums / self.term_count).cpu().numpy()
        self.term_sums.zero_()
        self.term_count = 0
        phases = self.timer.take(block=True)
        self.ctl[C.ENV_STEP_NS] += int(phases.get("env_step", 0.0) * 1e6)
        self.ctl[C.INGRESS_WRITE_NS] += int(phases.get("ingress_write", 0.0) * 1e6)
        if self.transport.device.type == "cuda":
            self.ctl[C.COLLECTOR_CUDA_PEAK] = torch.cuda.max_memory_reserved(self.transport.device)
        self.ctl[C.METRICS_SEQ] += 1

    def fault_hooks(self, step: int) -> None:
        fault = self.spec.fault
        if fault is None:
            return
        if fault.due("kill_collector", step):
            os.kill(os.getpid(), signal.SIGKILL)
        if fault.due("hang_collector", step):
            while self.parent_alive() and not self.ctl[C.STOP]:
                time.sleep(0.1)
            raise Stopped()

    def nan_reward_fault(self, step: int, result: StepResult) -> None:
        """SOAKLAB_FAULT=nan_reward@<step>: env 0's first reward term (and so its reward) turns NaN."""
        fault = self.spec.fault
        if fault is not None and fault.due("nan_reward", step) and result.reward_terms:
            term = next(iter(result.reward_terms.values()))
            term[0] = float("nan")
            result.reward[0] = float("nan")

    def save_state(self, next_step: int, prev: list[tuple[torch.Tensor, torch.Tensor]],
                   dones: list[torch.Tensor]) -> None:
        """The collector's half of a resumable checkpoint (soaklab.rl.resume), after vector step
        `next_step - 1` and before that vector is published: the learner cannot take it in, and so
        cannot write its own half, before this file exists."""
        assert self.spec.run_dir is not None
        save_atomic({"step": next_step, "envs": [env.state_dict() for env in self.envs],
                     "published": [(o, c, d) for (o, c), d in zip(prev, dones, strict=True)],
                     "term_sums": self.term_sums, "term_count": self.term_count,
                     "torch_rng": torch.get_rng_state()},
                    collector_path(Path(self.spec.run_dir), next_step))

    def start(self) -> tuple[int, list[tuple[torch.Tensor, torch.Tensor]], list[torch.Tensor]]:
        """Reset every env and publish the first observations, or, resuming, restore the saved
        state and publish again what had been published for the step the run resumes at."""
        if self.spec.resume_from is None:
            prev, dones = [], []
            for env in self.envs:
                obs, critic = env.reset()
                prev.append((obs, critic))
                dones.append(torch.zeros(obs.shape[0], device=obs.device))
            return 0, prev, dones
        state = load_weights(Path(self.spec.resume_from))  # as data; the learner read it so before spawning us
        for env, saved in zip(self.envs, state["envs"], strict=True):
            env.load_state_dict(saved)
        device = self.env_device
        prev = [(o.to(device), c.to(device)) for o, c, _ in state["published"]]
        dones = [d.to(device) for _, _, d in state["published"]]
        self.term_sums.copy_(state["term_sums"])
        self.term_count = int(state["term_count"])
        torch.set_rng_state(state["torch_rng"])
        return int(state["step"]), prev, dones

    def run(self) -> None:
        try:
            self.steps()
        finally:  # at the learner's stop too; not after an error, whose report must stay the first
            if sys.exc_info()[0] in (None, Stopped):
                self.write_diagnostics()
        for env in self.envs:
            env.close()
        if self.trace is not None:
            self.trace.close()

    def steps(self) -> None:
        ctl, r = self.ctl, self.rows
        first, prev, dones = self.start()
        for g, ((obs, _), done) in enumerate(zip(prev, dones, strict=True)):
            self.publish_obs(g, obs, done)
        if self.spec.fault is not None and self.spec.fault.name == "hang_collector_ready":
            while self.parent_alive() and not ctl[C.STOP]:  # never ready: start-up must be what times out
                time.sleep(0.1)
            raise Stopped()
        ctl[C.READY] = 1
        saving = self.spec.run_dir is not None and self.spec.save_interval > 0
        for step in range(first, self.spec.vector_steps):
            self.fault_hooks(step)
            last = step == self.spec.vector_steps - 1
            for g, (a, b) in enumerate(self.bounds):
                t0 = time.perf_counter_ns()
                wait(self.h.act_ready[g], ctl, self.parent_alive)
                ctl[C.ACTION_WAIT_NS] += time.perf_counter_ns() - t0
                actions = self.transport.take_actions(g, b - a).to(self.env_device)
                ctl[C.TICKS_CONSUMED] += 1
                bump_max(ctl, C.MAX_PUBLICATION_LAG, int(ctl[C.TICKS_ANSWERED] - ctl[C.TICKS_CONSUMED]) + 1)
                with self.timer.span("env_step"):
                    result = self.envs[g].step(actions)
                ctl[C.PHYSICS_UNSTABLE] += self.envs[g].physics_unstable()
                self.nan_reward_fault(step, result)
                if self.trace is not None:
                    self.trace_step(step, g, actions, result)
                # On the CPU the check is read at once, before anything of this step is published:
                # nothing non-finite reaches the learner. A GPU's flags are read later anyway (with
                # the metrics), so there the check is queued after the publication, off the path of
                # the learner's next inference (its ~0.1 ms of launches: docs/runtime.md).
                if not self.watch.deferred:
                    self.watch.check(step, *checked_step(actions, result))
                # The next observations go first: the learner's next inference waits on them alone,
                # and the staging below runs while it infers.
                dones[g] = result.done.to(torch.float32)
                if not last:  # after the final step nothing is left to answer
                    self.publish_obs(g, result.obs, dones[g])
                if self.watch.deferred:
                    self.watch.check(step, *checked_step(actions, result))
                obs, critic = prev[g]
                rows = self.staging[a:b]
                rows[:, r["obs"]] = obs
                rows[:, r["next_obs"]] = result.final_obs
                rows[:, r["critic"]] = critic
                rows[:, r["next_critic"]] = result.final_critic_obs
                rows[:, r["action"]] = actions
                rows[:, r["reward"]] = result.reward[:, None]
                rows[:, r["terminated"]] = result.terminated[:, None]
                rows[:, r["truncated"]] = result.truncated[:, None]
                values = step_metrics(result)
                self.term_sums += torch.stack([values[k].mean() for k in self.spec.metric_names]).double()
                self.term_count += 1
                prev[g] = (result.obs, result.critic_obs)
            if (step + 1) % self.spec.metrics_interval == 0 or last:
                self.write_metrics()  # before the ingress, so the learner sees step's metrics once drained
            # SAVE_AT was written before this step's actions were answered (the semaphore orders it).
            if saving and ((step + 1) % self.spec.save_interval == 0 or ctl[C.SAVE_AT] == step + 1) and not last:
                self.save_state(step + 1, prev, dones)
            self.publish_vector()
            ctl[C.VECTOR_STEPS] += 1

    def trace_step(self, step: int, g: int, actions: torch.Tensor, result: StepResult) -> None:
        """Group g's step into the trace (soaklab.rl.trace), stage by stage: the actions, the env's
        whole state after the step (physics, RNG, sampler), the rewards, the observations."""
        assert self.trace is not None
        at = f"g{g}/" if len(self.bounds) > 1 else ""
        self.trace.record(step, "action", {f"{at}action": actions})
        self.trace.record(step, "physics", flatten(self.envs[g].state_dict(), f"{at}env"))
        self.trace.record(step, "reward", {f"{at}reward": result.reward,
                                           **flatten(dict(result.reward_terms), f"{at}reward")})
        self.trace.record(step, "observation", {
            f"{at}obs": result.obs, f"{at}critic_obs": result.critic_obs, f"{at}final_obs": result.final_obs,
            f"{at}final_critic_obs": result.final_critic_obs, f"{at}terminated": result.terminated,
            f"{at}truncated": result.truncated})
