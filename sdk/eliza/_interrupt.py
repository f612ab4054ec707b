"""Blocking library calls that Ctrl-C can stop, and handles that are never
closed under a running call.

A ctypes call cannot be interrupted: Python runs its SIGINT handler only
once the C function returns, which for a long synthesis or diarization is
minutes later. So on the main thread :func:`run` makes the call on a worker
thread and waits for it in short slices; a KeyboardInterrupt (or any other
exception) there asks the library to cancel, waits until the call has
returned, and only then propagates. Off the main thread (where no
KeyboardInterrupt arrives) the call runs in place.

:class:`InFlight` counts the calls running on one handle, so ``close`` can
cancel them and wait before it frees the handle.

Example::

    guard = InFlight("diarizer")
    with guard.call():
        turns = run(lambda: lib().eliza_diarize(...), cancel=lambda: lib().eliza_diarizer_cancel(h))
    guard.close(cancel=..., free=lambda: lib().eliza_diarizer_close(h))
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from .errors import StateError, Status

__all__ = ["InFlight", "run"]

T = TypeVar("T")

# How long the waiting thread sleeps between looks at the worker, and how
# often a cancel request is repeated until the call returns (a call that had
# not reached the library yet would miss a single request), seconds.
_SLICE = 0.02


def _wait_out(done: threading.Event, cancel: Callable[[], None]) -> bool:
    """Cancels until ``done`` is set; returns whether another
    KeyboardInterrupt arrived meanwhile (it is held back: the call must
    return before anything frees what it uses)."""
    interrupted = False
    while True:
        try:
            cancel()
            if done.wait(_SLICE):
                return interrupted
        except KeyboardInterrupt:
            interrupted = True


def run(
    fn: Callable[[], T],
    cancel: Callable[[], None],
    tick: Callable[[], None] | None = None,
    tick_seconds: float = 0.1,
) -> T:
    """``fn()``, interruptible from the main thread: on an exception while it
    runs (Ctrl-C, or one raised by ``tick``), ``cancel()`` is called
    (repeatedly) until ``fn`` has returned, then the exception propagates
    and ``fn``'s result or error is dropped. ``fn`` must copy out and free
    whatever the library handed it. ``tick()`` (progress) is called on the
    waiting thread every ``tick_seconds``; with a ``tick`` the call runs on a
    worker from any thread."""
    if tick is None and threading.current_thread() is not threading.main_thread():
        return fn()
    result: list[T] = []
    failure: list[BaseException] = []
    done = threading.Event()
    # Whether the worker has begun fn, or will never: a Ctrl-C can land
    # inside Thread.start() (it waits for the thread), after the thread is
    # launched; the handle must then outlive the call all the same.
    gate = threading.Lock()
    began, abandoned = [False], [False]

    def work() -> None:
        try:
            with gate:
                if abandoned[0]:
                    return
                began[0] = True
            result.append(fn())
        except BaseException as e:  # handed to the waiting thread
            failure.append(e)
        finally:
            done.set()

    worker = threading.Thread(target=work, name="eliza-call", daemon=True)
    next_tick = time.monotonic() + tick_seconds
    try:
        worker.start()
        while not done.wait(_SLICE):
            if tick is not None and time.monotonic() >= next_tick:
                tick()
                next_tick += tick_seconds
    except BaseException:
        if _abandon(gate, began, abandoned):
            _wait_out(done, cancel)
        raise
    if failure:
        raise failure[0]
    return result[0]


def _abandon(gate: threading.Lock, began: list[bool], abandoned: list[bool]) -> bool:
    """Marks the call abandoned unless the worker has begun it; returns
    whether it has (then it must be waited for). Holds back Ctrl-C."""
    while True:
        try:
            with gate:
                abandoned[0] = True
                return began[0]
        except KeyboardInterrupt:
            continue


class InFlight:
    """The calls running on one native handle. ``call()`` brackets each;
    ``close()`` refuses new calls, cancels the running ones, waits for them,
    then frees the handle once."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._cond = threading.Condition()
        self._running = 0
        self._closing = False

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        """Raises StateError once ``close()`` has begun."""
        with self._cond:
            if self._closing:
                raise StateError(Status.E_STATE, f"the {self._what} is closed")
            self._running += 1
        try:
            yield
        finally:
            with self._cond:
                self._running -= 1
                self._cond.notify_all()

    @property
    def closing(self) -> bool:
        return self._closing

    def close(self, cancel: Callable[[], None], free: Callable[[], None]) -> None:
        """Idempotent: only the first close frees. A KeyboardInterrupt while
        it waits is held until the handle is freed, then raised."""
        with self._cond:
            if self._closing:
                return
            self._closing = True
        interrupted = False
        while True:
            try:
                with self._cond:
                    if self._running == 0:
                        break
                cancel()
                with self._cond:
                    self._cond.wait(_SLICE)
            except KeyboardInterrupt:
                interrupted = True
        free()
        if interrupted:
            raise KeyboardInterrupt
