"""Loaded by every Python process that has this folder on PYTHONPATH (spawned children inherit it):
logs each named semaphore registered with or unregistered from multiprocessing's resource tracker,
with the registering stack, to stderr. The tracker's "There appear to be N leaked semaphore objects"
names no owner; `python3 scripts/gpu/semtrace/leaks.py LOG` pairs the lines and prints the stack of
each name registered and never unregistered.

    PYTHONPATH=scripts/gpu/semtrace:$PYTHONPATH python3 -m soaklab train ... 2>&1 | tee train.log
"""

import os
import sys
import traceback
from multiprocessing import resource_tracker

_register, _unregister = resource_tracker.register, resource_tracker.unregister


def _line(event: str, name: str, stack: str = "") -> None:
    flat = stack.replace("\n", "\\n")
    sys.stderr.write(f"semtrace {event} pid={os.getpid()} name={name} stack={flat}\n")
    sys.stderr.flush()


def register(name: str, rtype: str) -> None:
    if rtype == "semaphore":
        _line("register", name, "".join(traceback.format_stack()[:-1]))
    _register(name, rtype)


def unregister(name: str, rtype: str) -> None:
    if rtype == "semaphore":
        _line("unregister", name)
    _unregister(name, rtype)


resource_tracker.register, resource_tracker.unregister = register, unregister
