"""A line every so often while something long runs: a daemon thread that calls ``say`` with
``line(elapsed_s)`` whenever ``every`` seconds passed without a line (an export's stage, an
emulated generation of minutes), so a long step is never minutes of silence."""

from __future__ import annotations

import threading
import time
from typing import Callable

# Seconds without a line after which a long step says it is still running.
EVERY_S = 30.0


class Heartbeat:
    """Entered, it watches; :meth:`said` (or any line through :meth:`say`) restarts the wait."""

    def __init__(self, say: Callable[[str], None] | None, line: Callable[[float], str],
                 every: float = EVERY_S, clock: Callable[[], float] = time.perf_counter):
        self._say, self.line, self.every, self.clock = say, line, every, clock
        self.t0 = self.last = clock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def elapsed(self) -> float:
        return self.clock() - self.t0

    def say(self, text: str) -> None:
        self.said()
        if self._say is not None:
            self._say(text)

    def said(self) -> None:
        self.last = self.clock()

    def beat(self) -> None:
        """Say the line if none came for ``every`` seconds."""
        if self.clock() - self.last >= self.every:
            self.say(self.line(self.elapsed()))

    def _run(self) -> None:
        while not self._stop.wait(min(self.every, 5.0)):
            self.beat()

    def __enter__(self) -> "Heartbeat":
        if self._say is not None:
            self._thread = threading.Thread(target=self._run, name="sme2-heartbeat",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
