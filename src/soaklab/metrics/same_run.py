"""Whether two run dirs hold the same run, bit for bit: every `Train/` and `Loss/` series, step for
step, and the final weights. A resumed run is judged against the unbroken one this way
(docs/runtime.md, "Resuming a run").

`python -m soaklab.metrics.same_run RUN_A RUN_B` prints `same` (exit 0) or the first difference
(exit 1); a run dir it cannot read (no or two event files, no final checkpoint, not plain data) is
refused in one line (exit 2)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import torch

from soaklab.errors import InvalidInput
from soaklab.files.checkpoints import load_weights
from soaklab.files.jsonfiles import read_json
from soaklab.files.rundir import RUN_CONFIG
from soaklab.metrics.events import event_file, read_scalars

COMPARED = ("Train/", "Loss/")


def series(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    frame = read_scalars(event_file(run_dir))
    return {tag: list(zip(rows.step.tolist(), rows.value.tolist(), strict=True))
            for tag, rows in frame.groupby("tag") if tag.startswith(COMPARED)}


def final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    agent = load_weights(run_dir / "checkpoints" / "model_final.pt")["agent"]
    return {f"{net}.{name}": value for net, state in agent.items() for name, value in state.items()
            if isinstance(value, torch.Tensor)}


# The run's own folder: differs between any two runs and changes nothing they compute.
OWN_KEYS = ("training.log_dir",)


def flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(value, dict):
        return {prefix: value}
    return {k: v for key, item in value.items() for k, v in flat(item, f"{prefix}{key}.").items()} if value \
        else {prefix: value}


def config_difference(a: Path, b: Path) -> str | None:
    """The first key (sorted) whose value the two runs' run_config.json resolve differently, with both
    values; None when they agree or either run has none."""
    paths = [run / RUN_CONFIG for run in (a, b)]
    if not all(p.is_file() for p in paths):
        return None
    ca, cb = ({"algo": r.get("algo"), "task": r.get("task"), "sim": r.get("sim"), "config": r.get("config")}
              for r in (read_json(p) for p in paths))
    fa, fb = flat(ca), flat(cb)
    for key in sorted(set(fa) | set(fb)):
        short = key.rstrip(".").removeprefix("config.")
        if short not in OWN_KEYS and fa.get(key, "(absent)") != fb.get(key, "(absent)"):
            return f"{short} {str(fa.get(key, '(absent)'))[:40]} vs {str(fb.get(key, '(absent)'))[:40]}"
    return None


def first_difference(a: Path, b: Path) -> str | None:
    """None when the two runs are the same bit for bit; else the first thing that differs."""
    sa, sb = series(a), series(b)
    if sorted(sa) != sorted(sb):
        return f"series differ: {sorted(set(sa) ^ set(sb))}"
    for tag in sorted(sb):
        if sa[tag] != sb[tag]:
            step = next((x[0] for x, y in zip(sa[tag], sb[tag], strict=False) if x != y), None)
            return f"{tag} differs from step {step} ({len(sa[tag])} and {len(sb[tag])} points)"
    wa, wb = final_weights(a), final_weights(b)
    if wa.keys() != wb.keys():
        return f"final weights hold other tensors: {sorted(set(wa) ^ set(wb))}"
    differing = [k for k in wb if not torch.equal(wa[k], wb[k])]
    return f"final weights differ in {differing[:3]}" if differing else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m soaklab.metrics.same_run",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("run_a", type=Path)
    parser.add_argument("run_b", type=Path)
    args = parser.parse_args(argv)
    try:
        difference = first_difference(args.run_a, args.run_b)
    except InvalidInput as exc:
        print(f"same_run: {exc}", file=sys.stderr)
        return exc.exit_code
    print("same" if difference is None else f"{args.run_a} and {args.run_b} differ: {difference}")
    return 0 if difference is None else 1


if __name__ == "__main__":
    raise SystemExit(main())
