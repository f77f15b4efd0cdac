"""The template sanity check: real drift is caught; thinking templates' own differences are reported apart."""

import asyncio
import dataclasses

import pytest

from vlm_envs import build_env
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines.contract import EngineOutput
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.trajectory import Segment, Status, check_against_template
from vlm_envs.testing import QWEN2_VL_TEMPLATE, build_tiny_processor

# Like Qwen3's thinking templates: the last assistant turn is rendered with an (empty) think block.
THINKING_TEMPLATE = QWEN2_VL_TEMPLATE.replace(
    "{{- render_content(message['content']) -}}",
    "{%- if message['role'] == 'assistant' and loop.last -%}"
    "{{- '<think>\\n\\n</think>\\n\\n' -}}{%- endif -%}"
    "{{- render_content(message['content']) -}}",
)


class Answers:
    """An in-process engine that answers fixed texts, one per turn."""

    def __init__(self, codec: ChatCodec, *texts: str):
        self.outputs = [[*codec.tokenize(t), codec.end_of_turn_id] for t in texts]

    async def generate(self, input_ids, images, sampling_params):
        ids = self.outputs.pop(0)
        return EngineOutput(token_ids=ids, log_probs=[-1.0] * len(ids), finish_reason="stop")


def solved_in_one_turn(codec: ChatCodec):
    env = build_env("sokoban", level="#####\n#@$.#\n#####")
    config = EpisodeConfig(max_turns=2, check_template=True)
    return asyncio.run(run_episode(env, Answers(codec, "<answer>Right</answer>"), codec, config=config))


@pytest.fixture(scope="module")
def processor():
    return build_tiny_processor()


def test_a_plain_template_matches_exactly(processor):
    traj = solved_in_one_turn(ChatCodec(processor))
    assert traj.status is Status.COMPLETED and traj.reward == 1.0
    assert traj.template_check.ok and not traj.template_check.thinking_only


def test_thinking_template_differences_pass_but_are_reported_apart(processor):
    traj = solved_in_one_turn(ChatCodec(processor, chat_template=THINKING_TEMPLATE))
    assert traj.status is Status.COMPLETED, traj.error
    assert traj.template_check.ok and traj.template_check.thinking_only
    assert "<think>" in traj.template_check.detail


def test_drift_in_an_observation_is_caught_with_its_position(processor):
    codec = ChatCodec(processor)
    env = build_env("sokoban", grid_size=(6, 6), num_boxes=1)
    config = EpisodeConfig(max_turns=2)
    engine = Answers(codec, "<answer>Up</answer>", "x")
    traj = asyncio.run(run_episode(env, engine, codec, seed=1, config=config))
    observation = traj.segments[1]
    assert not observation.trainable
    newline_lost = Segment(observation.ids[1:], None, trainable=False)  # the "render and cut" bug
    broken = dataclasses.replace(traj, segments=[traj.segments[0], newline_lost, *traj.segments[2:]])
    check = check_against_template(broken, codec)
    assert not check.ok and "first difference at token" in check.detail
    assert check_against_template(traj, codec).ok


class NoDecoding(ChatCodec):
    def decode(self, ids, skip_special_tokens=True):
        raise AssertionError("decoded again")


def test_segment_texts_are_made_once_with_special_tokens_and_go_with_the_response(processor):
    codec = ChatCodec(processor)
    traj = solved_in_one_turn(codec)
    texts = traj.segment_texts(codec)
    assert texts == ("<answer>Right</answer><|im_end|>",)
    assert traj.segment_texts(NoDecoding(processor)) is texts  # kept: a trainer's loop decodes nothing
    traj.discard_response("contract: broken")
    assert traj.segment_texts(codec) == ()
