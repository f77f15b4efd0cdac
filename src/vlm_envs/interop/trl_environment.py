"""vlm-envs envs for stock TRL ``GRPOTrainer(environment_factory=...)``, TRL's own environment route.

::

    from trl import GRPOConfig, GRPOTrainer
    from vlm_envs.interop.trl_environment import environment_factory

    trainer = GRPOTrainer(model=model, args=GRPOConfig(...), train_dataset=data, processing_class=processor,
                          environment_factory=environment_factory("sokoban", processor))

``environment_factory("sokoban", processor, url="http://HOST:PORT")`` plays the env on ``vlm-envs
serve`` instead (:class:`~vlm_envs.remote.RemoteEnv`).

On this route TRL makes every action a JSON tool call and answers it with a ``tool`` message. Each
instance plays one episode: ``reset(**row)`` starts it (the row's ``seed`` column, when there is one,
picks the episode; a GRPO group repeats its row, so it plays one seed; its ``difficulty`` and
``options`` columns are the env's reset options: :mod:`vlm_envs.interop.row_options`) and returns the
first observation's parts, which TRL appends to the row's last user message (after a blank line
where that message has text), ending with :attr:`TrlEnvironment.instructions`: the env's text asks
for replies such as ``<answer>...</answer>``, which only a ``reply`` tool call delivers here; the
``reply(text)`` tool hands
the model's reply to ``env.step`` and returns the next observation's parts, images included (TRL
takes image parts from tools since its PR #5323); each tool of the env itself (Geo3k's
``calc_score``, ZoomSearch's ``zoom``) is a tool of the same name, stepping the env with the
``<tool_call>`` text the env reads; ``get_reward()`` is the env's episode reward.

Rewards pass the one reward check (:mod:`vlm_envs.rewards`): a step reward or an episode reward that
is not a finite number within bounds (NaN, inf, ``None``, ``1e308``, or a reward that raises) ends the
episode, and ``get_reward()`` returns ``None`` with the reason in ``reward_error`` (logged, one line).
TRL reads ``None`` as NaN: a rollout every reward function left unscored is left out of its group's
baseline and gets no advantage (``GRPOTrainer._generate_and_score_completions``, TRL 1.16); raising
instead would end the training run.

What does not carry over: TRL parses tool calls only for the chat templates it recognizes (among VL
models, Qwen3-VL's; not Qwen2-VL's or Qwen2.5-VL's, refused by :func:`check_processor` in one line:
train those with :class:`~vlm_envs.rollout.trl.VlmEnvsGRPOTrainer`); every observation after the
first arrives as a ``tool`` message, not the env's own role; a reply the model writes without a tool
call never reaches the env (the episode then ends where it stands).
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import trl
from trl.chat_template_utils import add_response_schema

from vlm_envs.configured import build_configured_env
from vlm_envs.interop.row_options import row_reset_options
from vlm_envs.protocol import Env, Observation, check_seed
from vlm_envs.registry import get_spec
from vlm_envs.rewards import RewardError, call_reward, check_reward

#: The tool every env gets: the model's reply, as the env's text protocol reads it.
REPLY_TOOL = "reply"
#: Names TRL reserves on an environment class, and the class's own attributes (never tools).
RESERVED = ("reset", "get_reward", REPLY_TOOL, "instructions", "options_target", "env_name", "env_config")
#: JSON schema types as Python annotations (transformers writes the schema back from these).
JSON_TYPES: dict[str, Any] = {"string": str, "number": float, "integer": int, "boolean": bool, "object": dict}
#: What the first observation ends with on this route ({tools}: the env's own tools, where it has some).
INSTRUCTIONS = (
    "On this route every reply is a tool call: call the `reply` tool with your whole reply, written "
    "exactly as asked above, as its `text`{tools}. A reply the text above says to write without a "
    "tool call goes through `reply` too; text written outside a tool call is never read."
)
#: What stands between the row's prompt and the first observation.
SEPARATOR = "\n\n"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_log = logging.getLogger(__name__)


class UnsupportedTemplateError(ValueError):
    """A processor whose chat template TRL's tool loop cannot parse."""


def check_processor(processing_class: Any) -> None:
    """Raise :class:`UnsupportedTemplateError` (one line) unless TRL parses this template's tool calls."""
    tokenizer = getattr(processing_class, "tokenizer", processing_class)
    if getattr(tokenizer, "response_template", None) or getattr(tokenizer, "response_schema", None):
        return
    try:
        add_response_schema(processing_class)  # what GRPOTrainer does itself for a template it knows
    except ValueError:
        raise UnsupportedTemplateError(
            f"TRL {trl.__version__}'s environment_factory route parses tool calls only for chat templates it "
            "recognizes (Qwen3-VL's among VL models; not Qwen2-VL's or Qwen2.5-VL's): train this model "
            "with vlm_envs.rollout.trl.VlmEnvsGRPOTrainer"
        ) from None


class TrlEnvironment:
    """One episode of a vlm-envs env at a time, for TRL's ``environment_factory`` (see the module).

    Build classes with :func:`environment_factory`: each env's tools are methods of its own class, as
    TRL reads tools off the class. Public methods are TRL's: ``reset``, ``get_reward`` and the tools.
    """

    env_name: ClassVar[str] = ""
    env_config: ClassVar[dict[str, Any]] = {}
    #: Appended to the first observation (set by :func:`environment_factory`; "" appends nothing).
    instructions: ClassVar[str] = ""
    #: What checks a row's reset options (the env's registry target; ``None``: the server checks them).
    options_target: ClassVar[Any] = None
    #: Builds the env when given (private: TRL offers every public function of the class as a tool).
    _make_env: ClassVar[Callable[[], Env] | None] = None

    def __init__(self) -> None:
        self._env = (
            self._make_env()
            if self._make_env is not None
            else build_configured_env(self.env_name, None, self.env_config)
        )
        self._done = True
        self._steps = 0
        self.last_info: dict[str, Any] = {}
        #: Why this episode's reward was refused (``get_reward`` then returns ``None``), else ``None``.
        self.reward_error: str | None = None

    def reset(self, **row: Any) -> list[dict[str, Any]]:
        """Start an episode (the row's ``seed`` picks it; its ``difficulty`` and ``options`` are the
        env's reset options) and return its first observation's parts, then :attr:`instructions`."""
        seed = check_seed(row.get("seed"))  # a bad column: one clear error
        options = row_reset_options(row, self.options_target)
        obs, _ = self._env.reset(seed=seed) if options is None else self._env.reset(seed, options)
        self._done, self._steps = False, 0
        self.last_info, self.reward_error = {}, None
        parts = _parts(obs)
        if _has_text(row.get("prompt")):
            parts.insert(0, {"type": "text", "text": SEPARATOR})
        if self.instructions:
            parts.append({"type": "text", "text": SEPARATOR + self.instructions})
        return parts

    def reply(self, text: str) -> list[dict[str, Any]] | str:
        """Send your reply to the environment, written exactly as its instructions ask.

        Args:
            text: Your whole reply, for example <answer>A</answer>.
        """
        return self._step(text)

    def get_reward(self) -> float | None:
        """The env's episode reward (of the episode as far as it was played), checked; ``None`` (TRL:
        this rollout unscored) when it or a step reward was refused, the reason in ``reward_error``."""
        if self.reward_error is None:
            try:
                return call_reward(self._env.episode_reward, "the episode reward")
            except RewardError as err:
                self._refuse(err)
        return None

    def _step(self, text: str) -> list[dict[str, Any]] | str:
        if self._done:
            return "The episode is over: do not call any more tools."
        try:
            obs, self._done, info = self._env.step(text)
            check_reward(info.reward, f"the step reward of turn {self._steps}")
        except RewardError as err:  # the episode cannot be scored: it ends here, unscored
            self._done = True
            self._refuse(err)
            return "The episode is over: do not call any more tools."
        self._steps += 1
        self.last_info = {"reward": info.reward, "metrics": dict(info.metrics), "done": self._done}
        return _parts(obs)

    def _refuse(self, err: RewardError) -> None:
        self.reward_error = str(err)
        _log.warning("%s: reward refused, rollout left unscored: %s", type(self).__name__, err)


def environment_factory(
    env: str,
    processing_class: Any = None,
    *,
    url: str | Sequence[str] | None = None,
    make_env: Callable[[], Env] | None = None,
    **config: Any,
) -> type[TrlEnvironment]:
    """A :class:`TrlEnvironment` class for the registered env ``env`` (with ``config``), to pass as
    ``GRPOTrainer(environment_factory=...)``. ``url``: play it on ``vlm-envs serve`` server(s)
    (:class:`~vlm_envs.remote.RemoteEnv`, round robin); ``make_env`` builds the env any other way.
    ``processing_class`` is checked by :func:`check_processor`."""
    if processing_class is not None:
        check_processor(processing_class)
    if url is not None:
        from vlm_envs.remote import RemoteEnv  # the serve client's extra, only when asked for

        make_env = functools.partial(RemoteEnv, url, env, **config)
    probe = make_env() if make_env is not None else build_configured_env(env, None, config)
    try:
        if url is not None:  # a server answers the env's tools with a reset: play one to learn them
            probe.reset(seed=0)
        schemas = probe.tools()
    finally:
        probe.close()
    methods: dict[str, Any] = {"env_name": env, "env_config": dict(config)}
    if make_env is not None:
        methods["_make_env"] = staticmethod(make_env)
    if url is None:  # served: the server checks a row's options; else the env's own marks do
        methods["options_target"] = type(probe) if make_env is not None else get_spec(env).load()
    tools = [env_tool(schema) for schema in schemas]
    methods.update((tool.__name__, tool) for tool in tools)
    names = ", ".join(f"`{tool.__name__}`" for tool in tools)
    methods["instructions"] = INSTRUCTIONS.format(tools=f", or call its own tools ({names})" if tools else "")
    name = "".join(part.title() for part in re.split(r"[^A-Za-z0-9]+", env)) + "TrlEnvironment"
    return type(name, (TrlEnvironment,), methods)


def env_tool(schema: Mapping[str, Any]) -> Callable[..., Any]:
    """A method calling the env's own tool ``schema`` (an OpenAI function schema): its arguments
    become the ``<tool_call>`` text the env reads, with TRL's signature and docstring."""
    function = schema.get("function", schema)
    name = str(function.get("name", ""))
    if not _IDENTIFIER.match(name) or name in RESERVED or name.startswith("_"):
        raise ValueError(f"env tool {name!r} cannot be a TRL tool method (reserved or not an identifier)")
    properties = dict(function.get("parameters", {}).get("properties", {}))
    required = set(function.get("parameters", {}).get("required", ()))
    if not all(_IDENTIFIER.match(arg) for arg in properties):
        raise ValueError(f"env tool {name!r} has an argument that is not an identifier")

    def call(self: TrlEnvironment, **arguments: Any) -> list[dict[str, Any]] | str:
        call.__signature__.bind(self, **arguments)  # unknown or missing arguments: TypeError, as TRL expects
        given = {k: v for k, v in arguments.items() if v is not None}
        return self._step(f"<tool_call>\n{json.dumps({'name': name, 'arguments': given})}\n</tool_call>")

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    lines = [str(function.get("description") or name), "", "Args:"]
    for arg, spec in properties.items():
        optional = arg not in required
        kind = _annotation(spec)
        kind = kind | None if optional else kind
        annotations[arg] = kind
        default = None if optional else inspect.Parameter.empty
        params.append(
            inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind)
        )
        lines.append(f"    {arg}: {spec.get('description') or 'see the description above'}")
    call.__name__ = call.__qualname__ = name
    call.__doc__ = "\n".join(lines)
    call.__annotations__ = annotations
    call.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return call


def _annotation(spec: Mapping[str, Any]) -> Any:
    if spec.get("type") == "array":
        return list[_annotation(spec.get("items", {}))] if spec.get("items") else list
    return JSON_TYPES.get(str(spec.get("type")), str)


def _has_text(prompt: Any) -> bool:
    """Whether a row's conversational prompt ends with a message that has text (TRL appends the first
    observation to that message's content)."""
    if not isinstance(prompt, list) or not prompt or not isinstance(prompt[-1], Mapping):
        return False
    content = prompt[-1].get("content")
    if isinstance(content, list):
        return any(isinstance(p, Mapping) and p.get("type") == "text" and p.get("text") for p in content)
    return bool(content)


def _parts(obs: Observation) -> list[dict[str, Any]]:
    """An observation as the content parts TRL passes on (images as PIL images, in display order)."""
    return [dict(part) for part in obs.parts()] or [{"type": "text", "text": ""}]
