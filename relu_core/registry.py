"""Registries: :class:`LRURegistry`, a thread-safe, size-bounded mapping that drops its least recently used
entries (the app's run registry and per-session caches, so a server that has seen 50 uploads holds no more
than one that has seen ``bound``), and :func:`by_name`, the fixed registries declared as lists of entries."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Any, Protocol, TypeVar


class _Named(Protocol):
    name: str


Entry = TypeVar("Entry", bound=_Named)


class LRURegistry:
    """At most ``bound`` entries, and, with ``max_bytes``, at most that many bytes of arrays among them (numpy or
    torch: ``nbytes``, summed over a tuple's items; the newest entry is kept even when it alone is larger);
    reading (``[]``, ``get``) or writing an entry makes it the most recent, and adding one beyond a bound drops
    the least recently used. Safe to share between threads (sessions)."""

    def __init__(self, bound: int, max_bytes: int | None = None) -> None:
        if bound < 1:
            raise ValueError(f"bound must be at least 1, got {bound}")
        self.bound = bound
        self.max_bytes = max_bytes
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._sizes: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def __getitem__(self, key: Hashable) -> Any:
        with self._lock:
            value = self._items[key]
            self._items.move_to_end(key)
            return value

    def get(self, key: Hashable, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __setitem__(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._store(key, value)

    def setdefault(self, key: Hashable, value: Any) -> Any:
        """The entry ``key`` (made most recent), or ``value`` stored under it when absent."""
        with self._lock:
            if key not in self._items:
                self._store(key, value)
            self._items.move_to_end(key)
            return self._items[key]

    def _store(self, key: Hashable, value: Any) -> None:
        """Stores ``value`` as the most recent entry, then drops the oldest beyond the bounds (lock held)."""
        self._items[key] = value
        self._items.move_to_end(key)
        if self.max_bytes is not None:
            self._sizes[key] = _nbytes(value)
        while len(self._items) > self.bound or (
            self.max_bytes is not None and len(self._items) > 1 and sum(self._sizes.values()) > self.max_bytes
        ):
            oldest, _ = self._items.popitem(last=False)
            self._sizes.pop(oldest, None)

    def clear(self) -> None:
        """Drop every entry (e.g. to start as a fresh server process would)."""
        with self._lock:
            self._items.clear()
            self._sizes.clear()

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def __iter__(self) -> Iterator[Hashable]:
        with self._lock:
            return iter(list(self._items))


def _nbytes(value: Any) -> int:
    """Bytes of an array (numpy or torch), of a tuple's arrays, else 0."""
    if isinstance(value, tuple):
        return sum(_nbytes(item) for item in value)
    size = getattr(value, "nbytes", 0)
    return size if isinstance(size, int) else 0


def by_name(*entries: Entry) -> dict[str, Entry]:
    """``{entry.name: entry}`` in the given order (the data sets, the studies); ValueError when two entries
    share a name (a dict comprehension would keep the last one silently)."""
    registry: dict[str, Entry] = {}
    for entry in entries:
        if entry.name in registry:
            raise ValueError(f"two entries are named {entry.name!r}")
        registry[entry.name] = entry
    return registry
