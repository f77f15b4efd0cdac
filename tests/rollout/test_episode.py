import asyncio
import math

import pytest
from rollout_helpers import assert_trainer_invariants, script

from vlm_envs import build_env
from vlm_envs.rollout.engines.contract import EngineOutput
from vlm_envs.rollout.engines.sglang import SGLangEngine
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.trajectory import Status
from vlm_envs.testing import Fault

SAMPLING = {"temperature": 1.0}


def play(server, codec, env, config, seed=0, **kwargs):
    async def main():
        async with SGLangEngine(
            server.url, max_retries=2, backoff=0.01, turn_timeout=kwargs.pop("turn_timeout", 30)
        ) as eng:
            return await run_episode(
                env, eng, codec, seed=seed, config=config, sampling_params=SAMPLING, **kwargs
            )

    return asyncio.run(main())


def test_sokoban_vision_episode_of_several_turns_is_token_exact(served):
    server, codec = served
    env = build_env("sokoban", grid_size=(6, 6), num_boxes=1, render_mode="vision")
    script(
        server, codec, "<answer>Up</answer>", "I think <answer>Left, Down</answer>", "<answer>Right</answer>"
    )
    traj = play(
        server, codec, env, EpisodeConfig(max_turns=3, max_new_tokens=32, check_template=True), seed=4
    )
    assert traj.status is Status.TRUNCATED and traj.error is None  # max_turns reached
    assert traj.turns[0].model_text == "<answer>Up</answer>"
    assert [t.metrics["format_valid"] for t in traj.turns] == [True, True, True]
    assert traj.template_check.ok, traj.template_check.detail
    assert len(traj.images) == 3  # the first frame and one per observation kept (the last is not encoded)
    assert_trainer_invariants(traj, codec)
    # the engine's log probs are the model's own log probs of the generated tokens
    offset = len(traj.prompt_ids)
    vision_start = codec.tokenizer.convert_tokens_to_ids("<|vision_start|>")
    for seg in traj.segments:
        if seg.trainable:
            prefix = traj.tokens[:offset]
            n_images = prefix.count(vision_start)
            inputs = server.engine.prepare(prefix, [p.image for p in traj.images[:n_images]])
            expected = server.engine.score(inputs, seg.ids)
            assert max(abs(a - b) for a, b in zip(expected, seg.log_probs, strict=True)) < 1e-3
        offset += len(seg.ids)


def test_sampled_generations_keep_the_invariants(served):
    server, codec = served
    env = build_env("sokoban", grid_size=(6, 6), num_boxes=1)
    for seed in range(3):
        traj = play(
            server, codec, env, EpisodeConfig(max_turns=3, max_new_tokens=16, check_template=True), seed
        )
        assert traj.status in (Status.TRUNCATED, Status.COMPLETED), traj.error
        assert traj.template_check.ok, traj.template_check.detail
        assert_trainer_invariants(traj, codec)


def test_geo3k_tool_call_episode_scores_the_right_answer(served):
    server, codec = served
    env = build_env("geo3k")
    env.reset(seed=11)
    answer = env.reference_answer
    script(server, codec, env.tool_call(answer), f"So the answer is \\boxed{{{answer}}}.")
    traj = play(
        server, codec, env, EpisodeConfig(max_turns=4, max_new_tokens=64, check_template=True), seed=11
    )
    assert traj.status is Status.COMPLETED, traj.error
    assert traj.reward == 1.0 and len(traj.turns) == 2
    assert traj.turns[0].observation.role == "tool"
    assert "<|im_start|>tool" in codec.decode(traj.segments[1].ids, skip_special_tokens=False)
    assert traj.template_check.ok, traj.template_check.detail
    assert_trainer_invariants(traj, codec)


def test_stop_string_turn_gets_the_end_of_turn_token_in_its_delta(served):
    server, codec = served
    env = build_env("sokoban", grid_size=(6, 6), num_boxes=1)
    script(server, codec, "<answer>Up</answer>", eos=False)  # as if stopped on a stop string
    script(server, codec, "<answer>Down</answer>")
    traj = play(
        server, codec, env, EpisodeConfig(max_turns=2, max_new_tokens=32, check_template=True), seed=2
    )
    observation = traj.segments[1]
    assert not observation.trainable and observation.ids[0] == codec.end_of_turn_id
    assert traj.template_check.ok, traj.template_check.detail


def test_a_budget_that_cuts_an_image_observation_keeps_neither_tokens_nor_image(served):
    server, codec = served
    env = build_env("sokoban", grid_size=(6, 6), num_boxes=1)
    prompt_len = len(codec.encode_prompt([env.format_observation(env.reset(seed=1)[0])]).ids)
    script(server, codec, "<answer>Up</answer>")
    server.requests.clear()
    config = EpisodeConfig(max_turns=4, max_new_tokens=32, max_context_tokens=prompt_len + 60)
    traj = play(server, codec, env, config, seed=1)
    assert traj.status is Status.TRUNCATED
    assert len(traj.images) == 1 and len(traj.segments) == 1 and traj.segments[0].trainable
    assert_trainer_invariants(traj, codec)
    # never sent a request that could not fit
    for request in server.requests:
        assert len(request["input_ids"]) + request["sampling_params"]["max_new_tokens"] <= prompt_len + 60


class ScriptedEngine:
    """An in-process Engine answering fixed token ids (the test server scores scripted ids with the model,
    which rejects an image token without an image, so this case cannot go over HTTP)."""

    def __init__(self, *outputs: list[int]):
        self.outputs = list(outputs)

    async def generate(self, input_ids, images, sampling_params):
        ids = self.outputs.pop(0)
        return EngineOutput(token_ids=ids, log_probs=[-1.0] * len(ids), finish_reason="stop")


def test_generated_image_token_ends_the_episode_without_it(served):
    _, codec = served
    env = build_env("sokoban", grid_size=(6, 6), num_boxes=1)
    answer = codec.tokenize("<answer>Up</answer>")
    engine = ScriptedEngine([*answer, codec.image_token_id, *codec.tokenize("more"), codec.end_of_turn_id])
    config = EpisodeConfig(max_turns=3, max_new_tokens=32)
    traj = asyncio.run(run_episode(env, engine, codec, seed=1, config=config))
    assert traj.status is Status.TRUNCATED and "image special token" in traj.error
    assert traj.response_ids == answer
    assert_trainer_invariants(traj, codec)


def test_engine_placeholders_send_one_token_per_image(served):
    server, codec = served
    env = build_env("sokoban", grid_size=(6, 6), num_boxes=1)
    script(server, codec, "<answer>Up</answer>", "<answer>Up</answer>")
    server.requests.clear()
    config = EpisodeConfig(max_turns=2, max_new_tokens=16, engine_placeholders=True, check_template=True)
    traj = play(server, codec, env, config, seed=3)
    assert traj.template_check.ok
    last = server.requests[-1]["input_ids"]
    assert last.count(codec.image_token_id) == 2 and traj.tokens.count(codec.image_token_id) > 2
    assert_trainer_invariants(traj, codec)


@pytest.mark.parametrize(
    ("fault", "times", "status", "error"),
    [
        (Fault("status", status=500), 2, Status.TRUNCATED, None),  # recovers after retries
        (Fault("status", status=503), 5, Status.FAILED, "TransientEngineError"),
        (Fault("status", status=400), 1, Status.FAILED, "PermanentEngineError"),
        (Fault("delay", seconds=3.0), 3, Status.FAILED, "EngineTimeout"),
        (Fault("abort"), 1, Status.ABORTED, "aborted"),
        (Fault("body", body="{not json"), 1, Status.FAILED, "invalid JSON"),
    ],
)
def test_engine_faults_end_with_a_status_and_an_explicit_reward(served, fault, times, status, error):
    server, codec = served
    server.inject(fault, times=times)
    env = build_env("sokoban", grid_size=(6, 6), num_boxes=1)
    traj = play(server, codec, env, EpisodeConfig(max_turns=1, max_new_tokens=8), seed=1, turn_timeout=1.0)
    assert traj.status is status
    assert (error is None and traj.error is None) or error in traj.error
    assert isinstance(traj.reward, float) and math.isfinite(traj.reward)


def test_server_down_fails_the_episode(served):
    _, codec = served
    env = build_env("sokoban", grid_size=(6, 6), num_boxes=1)

    class Down:
        url = "http://127.0.0.1:9"  # discard port: nothing listens

    traj = play(Down, codec, env, EpisodeConfig(max_turns=2), seed=1)
    assert traj.status is Status.FAILED and "connection failed" in traj.error and traj.reward == 0.0


def test_env_errors_fail_one_episode_while_the_loop_serves_the_others(served):
    server, codec = served

    def exploding():
        env = build_env("sokoban", grid_size=(6, 6), num_boxes=1)

        def step(text):
            raise RuntimeError("the env broke")

        env.step = step
        return env

    ticks: list[float] = []

    async def heartbeat(stop: asyncio.Event):
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            ticks.append(loop.time())
            await asyncio.sleep(0.01)

    async def main():
        stop = asyncio.Event()
        beat = asyncio.create_task(heartbeat(stop))
        async with SGLangEngine(server.url) as eng:
            config = EpisodeConfig(max_turns=2, max_new_tokens=8)
            envs = [exploding()] + [build_env("sokoban", grid_size=(6, 6), num_boxes=1) for _ in range(3)]
            trajs = await asyncio.gather(
                *(run_episode(e, eng, codec, seed=i, config=config) for i, e in enumerate(envs))
            )
        stop.set()
        await beat
        return trajs

    trajs = asyncio.run(main())
    assert trajs[0].status is Status.FAILED and "the env broke" in trajs[0].error and trajs[0].reward == 0.0
    assert all(t.status is not Status.FAILED for t in trajs[1:]), [t.error for t in trajs[1:]]
    assert len(ticks) > 5


def test_a_reset_that_raises_fails_cleanly(served):
    server, codec = served
    env = build_env("sokoban", grid_size=(6, 6), num_boxes=1)
    env.reset = lambda seed=None: (_ for _ in ()).throw(ValueError("no level"))
    traj = play(server, codec, env, EpisodeConfig(max_turns=2), seed=1)
    assert traj.status is Status.FAILED and "reset" in traj.error and traj.response_length == 0


def test_trainer_abort_flag_stops_before_the_next_generation(served):
    server, codec = served
    env = build_env("sokoban", grid_size=(6, 6), num_boxes=1)
    traj = play(server, codec, env, EpisodeConfig(max_turns=3), seed=1, should_abort=lambda: True)
    assert traj.status is Status.ABORTED and traj.response_length == 0
