"""What a :class:`~vlm_envs.remote.RemoteEnv` given several servers keeps of its episode, so that the
episode outlives the server playing it: the episode's latest snapshot, and where to restore it.

Right after a reset the server hands out the episode's snapshot (one message per episode: the env, its
config and rules version as that server names them, the seed it played, its options); from then on the
client appends each reply the server answered to the snapshot's replay record and seals it again when it
needs it (:func:`vlm_envs.snapshot.seal`), so a step costs nothing more on the wire. (An env that keeps a
state of its own, not a replay record, is not kept: its episodes end with their server.) The server's
snapshot is hostile input like any reply: bounded, whole (its digest matches) and of the episode
just reset (seed and no replies), or :class:`~vlm_envs.remote_wire.MalformedReply`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from vlm_envs.remote_wire import MalformedReply, Reply, parse_reply
from vlm_envs.serve.sessions import LOST, SHUTTING_DOWN
from vlm_envs.serve.wire import SESSION_ERROR
from vlm_envs.snapshot import REPLAY_KEYS, SnapshotError, SnapshotOwner, open_sealed, seal

#: The metric a step's ``StepInfo.metrics`` carries when its episode was restored on another server first.
RESTORES_METRIC = "remote_restores"


class KeptSnapshot:
    """The latest snapshot of one episode: a server's, extended by the replies played since."""

    def __init__(self, snapshot: Any, seed: int | None = None, fresh: bool = False) -> None:
        """``snapshot`` as a server sent it, checked; with ``fresh`` it must be the episode just reset
        (with ``seed``, when the reset gave one): a replay at its first turn."""
        if type(snapshot) is not dict:
            raise MalformedReply(f"a snapshot is a JSON object, got {type(snapshot).__name__}")
        try:
            self.owner = SnapshotOwner(
                snapshot.get("env"), snapshot.get("config"), snapshot.get("rules_version")
            )
            self.state = copy.deepcopy(open_sealed(snapshot, self.owner))  # its own: replies go on it
        except SnapshotError as err:
            raise MalformedReply(f"snapshot: {err}") from None
        self.replay = type(self.state) is dict and self.state.keys() == REPLAY_KEYS
        if fresh and self.replay and (self.state["replies"] or seed not in (None, self.state["seed"])):
            raise MalformedReply("the snapshot is not of the episode just reset")

    def played(self, reply: str) -> None:
        """One more reply the server answered."""
        self.state["replies"].append(reply)

    def snapshot(self) -> dict[str, Any]:
        """The episode as it stands, sealed."""
        return seal(self.owner, self.state)

    def restore_message(self, env: str, config: dict[str, Any], episode_id: str) -> dict[str, Any]:
        """The WebSocket message that continues the episode (``episode_id``) on a server: a reset of the
        env and config the episode was reset with, carrying its snapshot."""
        data = {"env": env, "config": config, "episode_id": episode_id, "snapshot": self.snapshot()}
        return {"type": "reset", "data": data}

    @staticmethod
    def parse_restored(data: dict[str, Any], episode_id: str, steps: int) -> Reply:
        """A restore's reply, which must name the episode lost, at the step it was lost
        (:class:`MalformedReply` otherwise)."""
        reply = parse_reply(data, "restore")
        if reply.metadata.episode_id != episode_id or reply.metadata.step != steps:
            raise MalformedReply("the restored episode is not the one lost, at the step it was lost")
        return reply


def restore_order(urls: Sequence[str], current: str) -> list[str]:
    """Where to restore an episode lost on ``current``: the other servers in turn, then ``current`` (a
    server whose worker died still serves)."""
    at = urls.index(current)
    others = [urls[(at + i) % len(urls)] for i in range(1, len(urls))]
    return [*others, current]


def session_gone(status: int | None, code: str | None, message: str) -> bool:
    """Whether a server's error frame says the session, and its episode, is gone: 410, a session lost
    with its worker (500, :data:`~vlm_envs.serve.sessions.LOST`), a draining server's refusal (503), or
    the server closing the session on its own (``SESSION_ERROR`` with no status: idle)."""
    if status == 410 or (status is None and code == SESSION_ERROR):
        return True
    return message.startswith((LOST, SHUTTING_DOWN))
