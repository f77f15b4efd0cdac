"""Load balancing of model requests over several servers (repeated ``--base-url``).

:class:`LeastInFlight` holds one client per URL and lends the one with the fewest requests in
flight in this process (ties go to the earliest URL). The sglang policy wraps it in an engine and
the openai policy in its chat calls, so both spread a run's requests the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Generic, TypeVar

Client = TypeVar("Client")


class LeastInFlight(Generic[Client]):
    """Clients keyed by URL, lent out least-busy first; :meth:`lend` counts a request in flight."""

    def __init__(self, urls: Sequence[str], clients: Sequence[Client]) -> None:
        if not urls or len(urls) != len(clients):
            raise ValueError(f"need one client per URL, got {len(urls)} URLs and {len(clients)} clients")
        self.urls = tuple(urls)
        self.clients = tuple(clients)
        self.in_flight = [0] * len(urls)

    @contextlib.contextmanager
    def lend(self) -> Iterator[Client]:
        """The client of the URL with the fewest requests in flight, counted as busy until exit."""
        index = min(range(len(self.in_flight)), key=self.in_flight.__getitem__)
        self.in_flight[index] += 1
        try:
            yield self.clients[index]
        finally:
            self.in_flight[index] -= 1
