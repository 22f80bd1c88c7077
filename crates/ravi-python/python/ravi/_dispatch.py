"""Worker threads for Python callbacks (tools, ``approve``), started by the native half.

Ravi's own threads only queue a call here and wait for its answer; the call runs on one of
these Python threads, so an interpreter shutting down while a tool still runs ends that
thread the way it ends any Python daemon thread. A worker idle for a minute ends.
"""

from __future__ import annotations

import _thread
import queue
import threading
from typing import Any, Callable

_jobs: "queue.SimpleQueue[tuple[Callable[[Any], Any], Any, Callable[[Any], None]]]" = queue.SimpleQueue()
_lock = threading.Lock()
# Workers waiting for a job and not yet promised one.
_idle = 0

IDLE_SECONDS = 60.0


def submit(fn: Callable[[Any], Any], arg: Any, reply: Callable[[Any], None]) -> None:
    """Runs ``fn(arg)`` on a worker and passes its result to ``reply`` (``None`` if it
    raised). Never blocks."""
    global _idle
    with _lock:
        if _idle > 0:
            _idle -= 1
            start = False
        else:
            start = True
    _jobs.put((fn, arg, reply))
    if start:
        # `_thread` rather than `threading.Thread`: starting one does not wait for it.
        _thread.start_new_thread(_worker, ())


def _worker() -> None:
    global _idle
    while True:
        try:
            fn, arg, reply = _jobs.get(timeout=IDLE_SECONDS)
        except queue.Empty:
            with _lock:
                if _idle > 0:
                    _idle -= 1
                    return
            continue
        try:
            out = fn(arg)
        except BaseException:  # noqa: BLE001 - the wrappers answer every failure themselves
            out = None
        try:
            reply(out)
        except BaseException:  # noqa: BLE001 - a reply nobody waits for any more
            pass
        with _lock:
            _idle += 1
