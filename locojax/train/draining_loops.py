"""Event loops that finish their pending tasks before they close, for the span of an orbax call.

orbax (`asyncio_utils._run_sync_via_new_loop`) runs each restore on a fresh event loop with
`run_until_complete` and then closes it without cancelling what is left: when one array read fails,
`asyncio.gather` hands that first error up and every other read of the checkpoint is still in
flight. Those tasks are orphaned on a closed loop and report themselves later, at garbage collection
or interpreter exit ("Exception ignored in: <coroutine object _read_array_index_and_device_put>",
"Task was destroyed but it is pending!", "_GatheringFuture exception was never retrieved"), each
with the full TensorStore spec: thousands of lines, how many depending on timing (issue 27).

`draining_event_loops()` installs, for its block, an event-loop policy whose loops do at `close()`
what `asyncio.run` does at its end: cancel the pending tasks, await them with their results and
errors consumed, then shut down async generators and the default executor. Only loops created inside
the block are affected, a loop closed with nothing pending behaves exactly as before, and nothing is
filtered from logging: an error that is not an orphan of the first failure still propagates.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import warnings
from typing import Iterator

# Python 3.14 deprecates the public policy names (same classes, kept private for asyncio's own use).
_PolicyBase = getattr(asyncio.events, "_AbstractEventLoopPolicy", None) or asyncio.events.AbstractEventLoopPolicy
_LOCK = threading.Lock()


def drain_pending_tasks(loop: asyncio.AbstractEventLoop) -> int:
    """Cancel the loop's unfinished tasks and run it until they have all ended, consuming their results
    and exceptions (as `asyncio.run` does before it closes its loop).

    Args:
      loop: a loop that is not running and not closed (otherwise nothing is done).

    Returns:
      The number of tasks that were still pending.
    """
    if loop.is_closed() or loop.is_running():
        return 0
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
    if hasattr(loop, "shutdown_default_executor"):  # (threads started by asyncio.to_thread)
        loop.run_until_complete(loop.shutdown_default_executor())
    return len(pending)


class _DrainingPolicy(_PolicyBase):
    """Delegates to `base`; loops it creates drain their pending tasks when closed."""

    def __init__(self, base):
        self._base = base

    def get_event_loop(self):
        return self._base.get_event_loop()

    def set_event_loop(self, loop):
        return self._base.set_event_loop(loop)

    def new_event_loop(self):
        loop = self._base.new_event_loop()
        close = loop.close

        def close_after_draining():
            try:
                drain_pending_tasks(loop)
            finally:
                close()

        try:
            loop.close = close_after_draining
        except AttributeError:  # a loop type without instance attributes: closes as before
            pass
        return loop

    def __getattr__(self, name):  # e.g. get_child_watcher on Unix before Python 3.14
        return getattr(self._base, name)


def _get_policy():
    get = getattr(asyncio.events, "_get_event_loop_policy", None) or asyncio.get_event_loop_policy
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return get()


def _set_policy(policy) -> None:
    set_ = getattr(asyncio.events, "_set_event_loop_policy", None) or asyncio.set_event_loop_policy
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        set_(policy)


_active = {"depth": 0, "previous": None}  # open blocks (all threads) and the policy they replaced


@contextlib.contextmanager
def draining_event_loops() -> Iterator[None]:
    """For the block: event loops created by `asyncio.new_event_loop()` (in any thread) cancel and
    await their pending tasks when closed. Re-entrant and thread-safe (the policy stays installed while
    any block is open); the previous policy is restored when the last one exits."""
    with _LOCK:
        if _active["depth"] == 0:
            _active["previous"] = _get_policy()
            _set_policy(_DrainingPolicy(_active["previous"]))
        _active["depth"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _active["depth"] -= 1
            if _active["depth"] == 0:
                _set_policy(_active["previous"])
                _active["previous"] = None
