"""The policies ``vlm-envs eval`` can run, by their command-line spelling.

``oracle`` (``env.oracle_response()``; ``solver`` and ``reference``, its old names, still work) and
``random`` (``env.random_response``) need no model. ``openai:BASE_URL`` talks to a chat server and
needs only an HTTP client (extra ``openai``); ``sglang:URL`` and ``vllm:URL`` play through
:func:`vlm_envs.rollout.episode.run_episode`, the token-in/token-out loop training uses (extra
``rollout``). ``openai``, ``sglang`` and ``vllm`` alone take their servers from
``PolicyOptions.base_urls`` (repeated ``--base-url``) and balance requests over them.
"""

from __future__ import annotations

from collections.abc import Callable

from vlm_envs.eval.policies import OraclePolicy, Policy, PolicyError, PolicyOptions, RandomPolicy

#: The policy that plays ``env.oracle_response()``, whatever the env calls its player.
ORACLE = "oracle"
#: Old names of ``oracle`` (Sokoban's solver, Geo3k's reference player); they still work.
ORACLE_ALIASES = ("solver", "reference")
POLICY_KINDS = (ORACLE, "random", "openai:BASE_URL", "sglang:URL", "vllm:URL", "openai", "sglang", "vllm")
#: The policies that talk to servers, and the pyproject extra each needs with what it installs.
EXTRAS = {
    "openai": ("openai", "aiohttp, no torch"),
    "sglang": ("rollout", "torch, transformers, aiohttp"),
    "vllm": ("rollout", "torch, transformers, aiohttp"),
}
#: The policies that play token-in/token-out, as training does (``--history`` applies to them).
TOKEN_KINDS = ("sglang", "vllm")


def canonical_policy(spec: str) -> str:
    """``spec`` with an old name of the oracle replaced by ``oracle`` (what runs record)."""
    return ORACLE if spec in ORACLE_ALIASES else spec


def build_policy(spec: str, options: PolicyOptions | None = None) -> Policy:
    """A policy from its command-line spelling (see :data:`POLICY_KINDS`)."""
    options = options or PolicyOptions()
    spec = canonical_policy(spec)
    kind, sep, url = spec.partition(":")
    if options.history != "full" and kind not in TOKEN_KINDS:
        raise PolicyError(
            "--history applies to sglang:URL and vllm:URL only (the other policies see every turn)"
        )
    if options.base_urls and (sep or kind not in EXTRAS):
        if sep and kind in EXTRAS:
            raise PolicyError(
                f"--policy {spec} names its server and --base-url names more: give --policy {kind} "
                f"with --base-url URL (repeatable), or --policy {kind}:URL alone"
            )
        raise PolicyError(
            f"--base-url is for --policy openai, sglang or vllm; --policy {spec!r} uses no server"
        )
    scripted: dict[str, Callable[[], Policy]] = {ORACLE: OraclePolicy, "random": RandomPolicy}
    if spec in scripted:
        return scripted[spec]()
    if kind in EXTRAS and not sep and not options.base_urls:
        raise PolicyError(f"--policy {kind} needs its server: {kind}:URL, or --base-url URL (repeatable)")
    urls = options.base_urls or (url,)
    if kind in EXTRAS and all(urls):
        try:
            if kind == "openai":
                from vlm_envs.eval.openai_policy import OpenAIPolicy

                return OpenAIPolicy(urls, options)
            from vlm_envs.eval.sglang_policy import SGLangPolicy, VLLMPolicy

            return (VLLMPolicy if kind == "vllm" else SGLangPolicy)(urls, options)
        except ImportError as err:
            extra, what = EXTRAS[kind]
            raise PolicyError(
                f"policy {kind!r} needs the {extra} extra ({what}): pip install 'vlm-envs[{extra}]' ({err})"
            ) from err
    raise PolicyError(f"unknown policy {spec!r}; use one of: {', '.join(POLICY_KINDS)}")
