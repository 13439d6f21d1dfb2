"""Interpreter exit waits for calls into modelzip still running on
non-daemon threads.

Python waits for non-daemon threads at exit, except that CPython 3.11's
Thread.join() marks a thread that is still running as ended when a
KeyboardInterrupt interrupts the join (Ctrl-C while the main thread waits
for reader threads). A call into modelzip of such a thread that ends during
interpreter finalization aborted the process ("terminate called without an
active exception": Python ends a thread that takes the GIL back then, and
the unwinding cannot pass the C++ frame taking it back). This atexit hook
runs before finalization and waits for those calls (a Ctrl-C during a
remote read cancels it within a second); a further Ctrl-C ends the wait.
A call that still ends during finalization (a daemon thread's, or one this
wait gave up on) parks its thread instead of returning into Python
(bindings/released_gil.hpp).
"""
from __future__ import annotations

import atexit
import time

from . import _modelzip


def _wait_for_released_calls() -> None:
    try:
        while _modelzip._released_calls() > 0:
            time.sleep(0.005)  # releases the GIL, which those calls take back
    except KeyboardInterrupt:
        pass


atexit.register(_wait_for_released_calls)
