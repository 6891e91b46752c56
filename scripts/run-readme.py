"""Run the README's command blocks as written: every ```bash block, each in a fresh shell from the
repository root, in order; the first failing block fails the run. ```text blocks are shown, not run
(servers, cluster submissions). CI calls this after its own `make test` step, so that command is the
one left out (named with the reason). `--gpu` runs the ```bash gpu blocks instead: the GPU user's
commands, which CI (no GPU) never runs and a GPU visit runs as written (scripts/gpu/README.md).

    python3 scripts/run-readme.py [--skip 'make test'] [--gpu] [README.md]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path


def bash_blocks(text: str, tag: str = "bash") -> list[str]:
    """The bodies of the blocks fenced exactly as ```TAG (```bash never matches ```bash gpu)."""
    return re.findall(rf"^```{re.escape(tag)}\n(.*?)^```", text, re.S | re.M)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("readme", nargs="?", type=Path, default=Path("README.md"))
    parser.add_argument("--skip", action="append", default=[], metavar="COMMAND",
                        help="a command line run elsewhere (repeatable); skipped with a notice")
    parser.add_argument("--gpu", action="store_true", help="run the ```bash gpu blocks (on a GPU machine)")
    args = parser.parse_args()
    root = args.readme.resolve().parent
    tag = "bash gpu" if args.gpu else "bash"
    blocks = bash_blocks(args.readme.read_text(), tag)
    if not blocks:
        print(f"run-readme: {args.readme} has no ```{tag} block", file=sys.stderr)
        return 1
    # A --skip naming no line (a typo, a README edited since) would run the line it meant to leave
    # out: on a GPU visit, a 20-minute block. Refused before any block runs.
    present = {line.strip() for block in blocks for line in block.splitlines()}
    for command in args.skip:
        if command.strip() not in present:
            print(f"run-readme: --skip {command!r} names no line of the ```{tag} blocks of {args.readme}; "
                  "copy the line as written", file=sys.stderr)
            return 2
    for n, block in enumerate(blocks, 1):
        lines = []
        for line in block.splitlines():
            if line.strip() in args.skip:
                print(f"run-readme: block {n}: skipping `{line.strip()}` (run by the caller)", flush=True)
                continue
            lines.append(line)
        script = "\n".join(lines)
        print(f"run-readme: block {n}:\n" + "\n".join(f"  $ {line}" for line in lines if line.strip()), flush=True)
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=root)
        if done.returncode != 0:
            print(f"run-readme: block {n} failed (exit {done.returncode})", file=sys.stderr)
            return done.returncode
    print(f"run-readme: {len(blocks)} blocks of {args.readme} ran", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
