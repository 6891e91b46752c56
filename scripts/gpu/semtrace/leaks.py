#!/usr/bin/env python3
"""The semaphores a traced run registered and never unregistered, each with the stack that made it.

    python3 scripts/gpu/semtrace/leaks.py train.log   # exit 1 when any leaked
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

LINE = re.compile(r"semtrace (register|unregister) pid=(\d+) name=(\S+) stack=(.*)$")


def main() -> int:
    open_names: dict[str, tuple[str, str]] = {}
    for text in Path(sys.argv[1]).read_text(errors="replace").splitlines():
        match = LINE.search(text)
        if match is None:
            continue
        event, pid, name, stack = match.groups()
        if event == "register":
            open_names[name] = (pid, stack)
        else:
            open_names.pop(name, None)
    for name, (pid, stack) in open_names.items():
        print(f"leaked {name} (registered by pid {pid}):")
        print(stack.replace("\\n", "\n"))
    print(f"{len(open_names)} semaphore(s) registered and never unregistered")
    return 1 if open_names else 0


if __name__ == "__main__":
    sys.exit(main())
