"""What the emulator's stores kept by moto (S3, clients' log groups) share: moto keeps its backends in
process-wide state keyed by account, so every emulator in one process shares them. A fresh emulator empties
its account's (``clear``), and the last of the process's emulators to stop empties them (``close``)."""

from __future__ import annotations

import threading
from typing import ClassVar


class MotoStore:
    """One account's share of a moto backend; a subclass says how to empty it (``_empty``)."""

    # Per subclass: moto's backends are not written for concurrent writers, so each store's calls take it.
    lock: ClassVar[threading.RLock]
    _open: ClassVar[int]

    def __init_subclass__(cls) -> None:
        cls.lock = threading.RLock()
        cls._open = 0

    def __init__(self) -> None:
        self.version = 0  # counts the changes, so the state file rewrites the store only when it changed
        self._closed = False
        with self.lock:
            type(self)._open += 1

    def _empty(self) -> None:
        raise NotImplementedError

    def clear(self) -> None:
        """Empty the account's share (an emulator starting afresh)."""
        with self.lock:
            self._empty()
            self.version += 1

    def close(self) -> None:
        """Forget this store; the last one of its kind to close in the process empties moto's backend."""
        with self.lock:
            if self._closed:
                return
            self._closed = True
            type(self)._open -= 1
            if type(self)._open == 0:
                self._empty()
