"""Stock TRL GRPOTrainer(environment_factory=...) plays our envs: real GRPO steps on a tiny Qwen3-VL
(TRL's own copy of the Qwen3-VL template), every later turn's image in the training forward, the env's
reward as the reward; the first prompt as TRL renders it (the row's prompt, a blank line, the first
observation, the route's instructions); a row's difficulty and options pick the episode; Qwen2-VL's
template refused in one line; every env's oracle through the tools."""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

import datasets
import trl_helpers
from trl import GRPOTrainer
from trl.chat_template_utils import qwen2_5_vl_chat_template, qwen3_vl_chat_template

from vlm_envs import build_env, list_envs
from vlm_envs.fidelity import ImageFidelityCheck
from vlm_envs.interop.trl_environment import (
    INSTRUCTIONS,
    TrlEnvironment,
    UnsupportedTemplateError,
    check_processor,
    environment_factory,
)
from vlm_envs.serve.config import ServeConfig
from vlm_envs.testing import build_tiny_processor, build_tiny_qwen3_vl

sys.path.insert(0, str(Path(__file__).parents[1] / "serve"))
from serve_support import ServerThread

QUESTIONS = 3


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def qwen3_vl() -> Any:
    processor = build_tiny_processor("qwen3_vl")
    processor.chat_template = qwen3_vl_chat_template  # the published template, as TRL stores it
    return processor


def biased_toward(processor: Any, text: str) -> list[list[Any]]:
    """transformers' sequence_bias pushing generation to ``text`` then the end of the turn (a random
    tiny model never writes a tool call; its own log probs are what TRL trains on). Every episode of
    a group then plays alike: no advantage, nothing learned; what is checked is what the loss sees."""
    ids = processor.tokenizer.encode(text, add_special_tokens=False)
    ids.append(processor.tokenizer.convert_tokens_to_ids("<|im_end|>"))
    return [[ids[: k + 1], 100.0 * (k + 1)] for k in range(len(ids))]


def tool_call(letter: str) -> str:
    call = {"name": "reply", "arguments": {"text": f"<answer>{letter}</answer>"}}
    return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"


@pytest.fixture(scope="module")
def probe_server() -> Any:
    with ServerThread(ServeConfig(envs=("image_probe",), workers=1)) as running:
        yield running


@pytest.mark.parametrize("route", ["local", "served"])
def test_stock_grpo_trainer_trains_on_every_turns_image(route: str, request: Any, tmp_path: Path) -> None:
    """Two GRPO steps, the env in process or on ``vlm-envs serve`` (RemoteEnv)."""
    url = request.getfixturevalue("probe_server").url if route == "served" else None
    processor = qwen3_vl()
    model = build_tiny_qwen3_vl(processor).train()
    data = datasets.Dataset.from_list(
        [{"prompt": [{"role": "user", "content": "Play."}], "seed": seed} for seed in range(2)]
    )
    args = trl_helpers.config(
        tmp_path,
        max_completion_length=1000,
        max_tool_calling_iterations=QUESTIONS - 1,  # the turns after the first: one image each
        generation_kwargs={"sequence_bias": biased_toward(processor, tool_call("A"))},
    )
    factory = environment_factory("image_probe", processor, url=url, questions=QUESTIONS)
    trainer = GRPOTrainer(
        model=model, args=args, train_dataset=data, processing_class=processor, environment_factory=factory
    )
    check = ImageFidelityCheck(model, processor, raise_on_error=True, expect_image_each_turn=True)
    prompts = recording_prompts(processor)
    trainer.train()
    first = build_env("image_probe", questions=QUESTIONS).reset(0)[0]
    opening = "<|im_start|>user\nPlay.\n\n" + first.text.split("\n")[0]  # TRL's join, our blank line
    assert any(opening in prompt for prompt in prompts), prompts[0][-600:]
    assert all(factory.instructions + "<|im_end|>\n<|im_start|>assistant\n" in p for p in prompts)
    assert trainer.state.global_step == 2 and not check.problems
    assert not [r.skipped for r in check.reports if r.skipped]  # generate's prefills too were checked
    # generation's forwards hold the images so far; the loss's forward all of them: 1 prompt + 2 tool images
    assert max(r.images for r in check.reports if r.samples == 4) == 4 * QUESTIONS
    played = [env for env in trainer.environments if isinstance(env, TrlEnvironment)]
    assert len(played) == 4 and all(env.last_info["metrics"]["format_valid"] for env in played)
    assert {type(env._env).__name__ for env in played} == {"RemoteEnv" if url else "ImageProbeEnv"}
    logged = trainer.state.log_history[1]  # the second step's episodes are the ones still held
    rewards = [env.get_reward() for env in played]
    assert logged[f"rewards/{type(played[0]).__name__}/mean"] == pytest.approx(sum(rewards) / 4)
    assert logged["tools/call_frequency"] > 0 and logged["tools/failure_frequency"] == 0


def recording_prompts(processor: Any) -> list[str]:
    """The first prompts TRL renders through ``processor`` from now on (with tools, for generation)."""
    rendered: list[str] = []
    original = processor.apply_chat_template

    def recording(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("tools") and kwargs.get("add_generation_prompt"):
            text_kwargs = {**kwargs, "tokenize": False, "return_dict": False}
            rendered.extend(original(*args, **text_kwargs))
        return original(*args, **kwargs)

    processor.apply_chat_template = recording
    return rendered


def first_prompt(name: str, prompt: str = "Play.", **row: Any) -> str:
    """The first prompt of ``name``'s episode as TRL 1.16 renders it for a row whose prompt is one
    user message: that message's content, then ``reset``'s parts (TRL's join), with the class's tools."""
    processor = qwen3_vl()
    cls = environment_factory(name, processor)
    env = cls()
    messages = [{"role": "user", "content": prompt}]
    parts = env.reset(prompt=messages, **row)
    joined = [{**messages[-1], "content": [{"type": "text", "text": prompt}, *parts]}]
    tools = [getattr(env, n) for n in dir(cls) if inspect.isfunction(getattr(cls, n, None))]
    tools = [t for t in tools if not t.__name__.startswith("_") and t.__name__ not in ("reset", "get_reward")]
    return processor.apply_chat_template(joined, tools=tools, add_generation_prompt=True, tokenize=False)


def test_the_first_prompt_asks_for_the_reply_tool() -> None:
    """The row's prompt and the first observation stand a blank line apart, and the observation ends by
    saying that replies go through the ``reply`` tool (the env's text asks for ``<answer>...</answer>``)."""
    rendered = first_prompt("sokoban", seed=1)
    print(rendered)  # docs/interop.md shows it
    assert "<|im_start|>user\nPlay.\n\nYou are playing Sokoban. Push every box onto a target." in rendered
    note = INSTRUCTIONS.format(tools="")
    assert rendered.endswith(f"Moves left: 100.\n\n{note}<|im_end|>\n<|im_start|>assistant\n")
    assert '"name": "reply"' in rendered and "Play.You" not in rendered
    geo3k = first_prompt("geo3k", seed=0)
    assert "or call its own tools (`calc_score`)" in geo3k and '"name": "calc_score"' in geo3k
    assert "<|im_start|>user\nYou are playing Sokoban." in first_prompt("sokoban", prompt="", seed=1)


def test_a_rows_difficulty_and_options_pick_the_episode() -> None:
    """A row's ``difficulty`` and ``options`` columns are the env's reset options: the episode of
    ``build_env(env, difficulty=...)`` (or of those options as config); a bad one is one clear error."""
    env = environment_factory("sokoban")()

    def shown(parts: list[dict]) -> list:
        return [p.get("text") or p["image"].tobytes() for p in parts]

    for row, config in (
        ({"difficulty": "hard"}, {"difficulty": "hard"}),
        ({"options": {"grid_size": [7, 7]}}, {"grid_size": [7, 7]}),
    ):
        expected = build_env("sokoban", **config).reset(3)[0]
        parts = env.reset(seed=3, **row)
        assert shown(parts[:-1]) == shown([dict(p) for p in expected.parts()])
        assert shown(parts) != shown(environment_factory("sokoban")().reset(seed=3))
    none_filled = env.reset(
        seed=3, options={"grid_size": [7, 7], "num_boxes": None}
    )  # a dataset's struct column
    assert shown(none_filled) == shown(env.reset(seed=3, options={"grid_size": [7, 7]}))
    for row, message in (
        ({"difficulty": "extreme"}, "difficulty must be one of easy, medium, hard"),
        ({"options": "grid_size=7"}, "options must be a mapping"),
        ({"difficulty": "hard", "options": {"difficulty": "easy"}}, "gives its level twice"),
    ):
        with pytest.raises(ValueError, match=message) as refused:
            env.reset(seed=3, **row)
        assert "\n" not in str(refused.value)
    with pytest.raises(ValueError, match="'dataset' is refused"):  # rows choose episodes, never files
        environment_factory("geo3k")().reset(seed=0, options={"dataset": "/"})


def test_qwen2_vl_templates_are_refused_in_one_line() -> None:
    processor = build_tiny_processor("qwen2_vl")
    processor.chat_template = qwen2_5_vl_chat_template  # Qwen2-VL ships the same template
    with pytest.raises(UnsupportedTemplateError, match="VlmEnvsGRPOTrainer") as refused:
        environment_factory("sokoban", processor)
    assert "\n" not in str(refused.value)
    check_processor(qwen3_vl())


@pytest.mark.parametrize("name", [spec.name for spec in list_envs()])
def test_every_env_plays_its_oracle_through_the_tools(name: str) -> None:
    """Each registered env's oracle, replayed through the class TRL would call: its own tools by name,
    everything else through ``reply``; the episode reward is the env's."""
    cls = environment_factory(name)
    env, reference = cls(), cls()._env
    parts = env.reset(seed=1)
    reference.reset(seed=1)
    assert parts and all(p["type"] in ("text", "image") for p in parts)
    for _ in range(50):
        answer = reference.oracle_response()
        if answer is None:
            break
        reference.step(answer)
        start = answer.rfind("<tool_call>")
        if start >= 0 and answer.rstrip().endswith("</tool_call>"):
            payload = json.loads(answer[start + len("<tool_call>") : answer.rfind("</tool_call>")])
            getattr(env, payload["name"])(**payload["arguments"])
        else:
            env.reply(answer)
    assert env.get_reward() == reference.episode_reward() and env.last_info["done"]
    assert env.reply("anything") == "The episode is over: do not call any more tools."


def test_hostile_rows_and_calls() -> None:
    """A bad seed column is one clear error; a tool call with unknown or missing arguments raises
    inside the call, which TRL records as a tool failure; hostile reply text is the env's to judge."""
    env = environment_factory("geo3k")()
    for seed in ("3", 2.5, -1, True):
        with pytest.raises((TypeError, ValueError), match="seed must be"):
            env.reset(seed=seed)
    env.reset(seed=0)
    with pytest.raises(TypeError):
        env.calc_score(answer="1", extra=2)
    with pytest.raises(TypeError):
        env.calc_score()
    parts = env.reply("<tool_call>{" * 10_000 + "\x00<|image_pad|>")
    assert (parts and not env.last_info["done"]) or env.last_info["metrics"]
