"""Delayed responses and the coordinator's timer: the two sans-I/O halves of Kafka's purgatory.

A :class:`Pending` is a response that may not exist yet (Kafka's ``CompletableFuture`` for
JoinGroup and SyncGroup). The coordinator completes it, exactly once, either during the call that
created it or during a later call (another member's request, or :meth:`GroupCoordinator.tick`).
It has no event loop of its own, so the core runs under a manual clock in plain tests. A broker
on asyncio bridges it in two lines::

    future = loop.create_future()
    pending.add_done_callback(future.set_result)   # runs at once if already done

Callbacks run synchronously inside the coordinator call that completes the response, on the
caller's thread; they must not call the coordinator themselves (``Future.set_result`` does not:
it schedules the awaiting coroutine).

The :class:`Timer` holds keyed deadlines (Kafka's ``CoordinatorTimer``): scheduling a key that is
already scheduled replaces it, and due entries are popped earliest first, ties in scheduling order.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class Pending(Generic[T]):
    """A response that is ready (:attr:`done`) or will be completed later by the coordinator."""

    __slots__ = ("_callbacks", "_done", "_result")

    def __init__(self) -> None:
        self._done = False
        self._result: T | None = None
        self._callbacks: list[Callable[[T], object]] = []

    @classmethod
    def completed(cls, result: T) -> Pending[T]:
        pending: Pending[T] = cls()
        pending.complete(result)
        return pending

    @property
    def done(self) -> bool:
        return self._done

    def result(self) -> T:
        """The response; raises ``RuntimeError`` while it is not ready."""
        if not self._done:
            raise RuntimeError("the response is not ready yet")
        return self._result  # type: ignore[return-value]

    def add_done_callback(self, callback: Callable[[T], object]) -> None:
        """Call ``callback(result)`` when the response is ready (now, if it already is)."""
        if self._done:
            callback(self._result)  # type: ignore[arg-type]
        else:
            self._callbacks.append(callback)

    def complete(self, result: T) -> bool:
        """Set the response; False (and no change) when it was already set."""
        if self._done:
            return False
        self._done = True
        self._result = result
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(result)
        return True

    def __repr__(self) -> str:
        return f"Pending({self._result!r})" if self._done else "Pending(<not ready>)"


class Timer:
    """Keyed deadlines in epoch milliseconds; a heap with lazy removal of replaced entries."""

    def __init__(self) -> None:
        self._entries: dict[Hashable, tuple[int, int, Callable[[], object]]] = {}
        self._heap: list[tuple[int, int, Hashable]] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def schedule(self, key: Hashable, deadline: int, callback: Callable[[], object]) -> None:
        seq = next(self._seq)
        self._entries[key] = (deadline, seq, callback)
        heapq.heappush(self._heap, (deadline, seq, key))

    def cancel(self, key: Hashable) -> None:
        self._entries.pop(key, None)

    def cancel_if(self, predicate: Callable[[Hashable], bool]) -> None:
        for key in [k for k in self._entries if predicate(k)]:
            del self._entries[key]

    def deadline(self, key: Hashable) -> int | None:
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def _drop_stale(self) -> None:
        while self._heap:
            _, seq, key = self._heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry[1] == seq:
                return
            heapq.heappop(self._heap)

    def next_deadline(self) -> int | None:
        """The earliest deadline, or None when nothing is scheduled."""
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: int) -> tuple[int, Callable[[], object]] | None:
        """Remove and return ``(deadline, callback)`` of the earliest entry due at ``now``."""
        self._drop_stale()
        if not self._heap or self._heap[0][0] > now:
            return None
        deadline, _, key = heapq.heappop(self._heap)
        _, _, callback = self._entries.pop(key)
        return deadline, callback
