"""A dependency-free progress line: episodes done, success so far, rate and ETA."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _duration(seconds_float: float) -> str:
    seconds = round(seconds_float)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Progress:
    """Redraws one line on a terminal; elsewhere prints a line every ``interval`` seconds and at the end."""

    def __init__(
        self,
        total: int,
        done: int = 0,
        successes: int = 0,
        stream: TextIO | None = None,
        interval: float = 5.0,
    ) -> None:
        self.total, self.done, self.successes = total, done, successes
        self.start_done = done
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval
        self.started = time.monotonic()
        self._last_print = 0.0

    def line(self) -> str:
        """The current progress text."""
        width = 24
        filled = width * self.done // self.total if self.total else width
        elapsed = time.monotonic() - self.started
        new = self.done - self.start_done
        rate = new / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else None
        success = f"{self.successes}/{self.done} ({self.successes / self.done:.0%})" if self.done else "-"
        return (
            f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} episodes | "
            f"success {success} | {rate:.2f} ep/s | ETA {_duration(eta) if eta is not None else '?'}"
        )

    def update(self, success: bool) -> None:
        """Count one finished episode and redraw."""
        self.done += 1
        self.successes += bool(success)
        now = time.monotonic()
        if self.tty:
            self.stream.write("\r" + self.line())
            self.stream.flush()
        elif now - self._last_print >= self.interval or self.done == self.total:
            self._last_print = now
            self.stream.write(self.line() + "\n")
            self.stream.flush()

    def finish(self) -> None:
        """End the redrawn line."""
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
