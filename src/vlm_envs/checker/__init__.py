"""``check_env``: the conformance suite every environment, ours or a user's, must pass.

Each check turns a rule of the protocol into a message that names the check, says what happened and
what to change. All failures are collected and raised together as one :class:`EnvCheckError`. The
checks of single calls are in :mod:`~vlm_envs.checker.calls`, those of replay in
:mod:`~vlm_envs.checker.replay`, that of snapshots in :mod:`~vlm_envs.checker.snapshots`, that of the state
signals in :mod:`~vlm_envs.checker.signals`.
"""

from __future__ import annotations

from collections.abc import Callable

from vlm_envs.checker.calls import (
    HOSTILE_RESPONSES,
    NON_TEXT_RESPONSES,
    RAISE_HINT,
    check_close,
    check_hostile,
    check_malformed_replies_end,
    check_oracle,
    check_reset_and_messages,
    check_step_after_end,
    error_text,
)
from vlm_envs.checker.replay import (
    LARGE_SEED,
    check_determinism,
    check_rebuild,
    check_unseeded,
    determinism_seeds,
    episode_fingerprint,
)
from vlm_envs.checker.signals import check_signals, gives_signals
from vlm_envs.checker.snapshots import check_snapshots
from vlm_envs.protocol import Env

__all__ = [
    "HOSTILE_RESPONSES",
    "LARGE_SEED",
    "NON_TEXT_RESPONSES",
    "EnvCheckError",
    "check_env",
    "determinism_seeds",
    "episode_fingerprint",
]


class EnvCheckError(AssertionError):
    """The env broke one or more rules of the protocol; ``failures`` says which."""

    def __init__(self, env_name: str, failures: list[str]):
        self.failures = failures
        lines = "\n".join(f"  - {f}" for f in failures)
        super().__init__(f"{env_name} failed {len(failures)} check(s):\n{lines}")


def check_env(env: Env, seed: int = 0, *, step_timeout: float = 10.0, rebuild: bool = True) -> list[str]:
    """Run the conformance suite on ``env``; raise :class:`EnvCheckError` listing every failure, else
    return the names of the checks it passed (``vlm-envs check`` prints them).

    Each failure starts with the name of its check:

    - ``types``: ``reset``/``step`` return the protocol's types, rewards and metrics are finite, and
      ``format_observation`` gives one chat message whose image parts are the observation's images,
      and a PNG attached to an image (:func:`vlm_envs.imaging.attach_png`) decodes to its pixels;
    - ``determinism``: every seeded episode replays exactly (image bytes included) on several seeds:
      ``seed``, ``seed + 1``, ``seed + 2`` and the largest allowed, ``2**64 - 1``;
    - ``unseeded resets``: ``reset()`` without a seed works, plays another episode each time where the
      seed picks the episode (two unseeded resets differ, tried up to
      :data:`~vlm_envs.checker.replay.UNSEEDED_RESETS` times), and leaves what a seed means unchanged;
    - ``hostile replies``: the replies of :data:`HOSTILE_RESPONSES` (``<image>`` and chat-template
      injections, megabytes of text, ...), calls of the env's own tools with huge numbers
      (:func:`~vlm_envs.checker.calls.tool_probes`) and the env's own replies in digits of other scripts
      (:func:`~vlm_envs.checker.calls.lookalike_probes`) never raise and return within ``step_timeout``
      seconds; the replies of :data:`NON_TEXT_RESPONSES` are refused with ``TypeError``;
    - ``step after the end``: ``step`` after the episode ended raises ``EpisodeFinishedError``;
    - ``malformed replies end``: the same malformed reply sent again and again ends the episode within
      :data:`~vlm_envs.checker.calls.MAX_STEPS_TO_END` steps;
    - ``oracle``: where the env has ``oracle_response()``, it wins
      :data:`~vlm_envs.checker.calls.ORACLE_SEEDS` episodes;
    - ``close``: ``close()`` twice is fine;
    - ``snapshot``: an episode snapshot at several turns (finished included) and restored into a fresh env,
      in another process when ``rebuild`` (else into ``env``), goes on as the uninterrupted one: the turn
      and the field that differ are named;
    - ``state signals``: where the env says where its episode stands (:mod:`vlm_envs.state_signals`),
      ``state_key()``, ``state_text()`` and ``distance_to_goal()`` are of their types; episodes of malformed
      and random replies give the same ones in another process (when ``rebuild``); equal keys come with
      equal texts and distances; some key comes back at another turn (unless the env's ``states_recur`` is
      false or every episode ends at its first reply); and each turn of the oracle lowers the distance by
      exactly one, down to 0;
    - ``rebuild`` (when ``rebuild``): the env rebuilt from its spec in another process, with another
      ``PYTHONHASHSEED``, plays the same episodes for the determinism seeds.
    """
    name = env.spec.name if env.spec is not None else type(env).__name__
    failures: list[str] = []
    checks: dict[str, Callable[[Env, int], list[str]]] = {
        "types": check_reset_and_messages,
        "determinism": check_determinism,
        "unseeded resets": check_unseeded,
        "hostile replies": lambda e, s: check_hostile(e, s, step_timeout),
        "step after the end": check_step_after_end,
        "malformed replies end": check_malformed_replies_end,
        "oracle": check_oracle,
        "close": check_close,
        "snapshot": lambda e, s: check_snapshots(e, s, other_process=rebuild),
        "state signals": lambda e, s: check_signals(e, s, other_process=rebuild),
    }
    if type(env).oracle_response is Env.oracle_response:  # nothing to check: not listed as passed
        del checks["oracle"]
    if not _says_signals(env, seed):
        del checks["state signals"]
    if rebuild:
        checks["rebuild"] = check_rebuild
    for label, check in checks.items():
        try:
            found = check(env, seed)
        except Exception as err:  # a crash inside a check is itself the finding
            found = [f"The check itself stopped: the env raised {error_text(err)}. {RAISE_HINT}"]
        failures += [f"{label}: {message}" for message in found]
    if failures:
        raise EnvCheckError(name, failures)
    return list(checks)


def _says_signals(env: Env, seed: int) -> bool:
    """Whether the env gives any state signal after a reset (or raises from one); an env whose reset
    fails is left to the other checks."""
    try:
        env.reset(seed=seed)
    except Exception:  # the types check reports a reset that raises
        return False
    return gives_signals(env)
