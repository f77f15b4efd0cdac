"""Resuming an aborted episode without any trainer: ``run_episode`` leaves a resume state on an ABORTED
trajectory, ``rebuild`` makes the trajectory as it stood from that state and what a trainer keeps, and
``run_episode(resume=...)`` goes on as if the episode had never been cut."""

from __future__ import annotations

import asyncio
import json

import pytest
from rollout_helpers import SOKOBAN, assert_trainer_invariants
from toyenvs.colors import ColorsEnv

from vlm_envs import build_env
from vlm_envs.rollout.contract import TokenSpace, token_violations
from vlm_envs.rollout.engines.sglang import SGLangEngine
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.record import turn_standing
from vlm_envs.rollout.resume import ResumeError, ResumeRequest, rebuild, segments_after
from vlm_envs.rollout.segment import Segment
from vlm_envs.rollout.trajectory import Status, Trajectory
from vlm_envs.testing import Fault

MOVES = ["<answer>Up</answer>", "<answer>Left</answer>", "<answer>Down</answer>"]
CONFIG = EpisodeConfig(max_turns=3, max_new_tokens=32, check_template=True)


def play(server, env, codec, **kwargs) -> Trajectory:
    async def main():
        async with SGLangEngine(server.url) as engine:
            return await run_episode(
                env, engine, codec, config=CONFIG, sampling_params={"temperature": 1.0}, **kwargs
            )

    return asyncio.run(main())


def kept_by_a_trainer(traj: Trajectory) -> ResumeRequest:
    """What a trainer holds of an ABORTED trajectory, and its resume state through JSON."""
    return ResumeRequest(
        state=json.loads(json.dumps(traj.resume)),
        tokens=tuple(traj.tokens),
        response_length=traj.response_length,
        loss_mask=tuple(traj.loss_mask),
        log_probs=tuple(traj.log_probs),
        images=tuple(p.image for p in traj.images),
    )


def answer(server, codec, *texts) -> list[list[int]]:
    ids = [[*codec.tokenize(text), codec.end_of_turn_id] for text in texts]
    for reply in ids:
        server.inject(Fault("tokens", token_ids=tuple(reply)))
    return ids


def test_an_aborted_episode_rebuilds_as_it_stood_and_goes_on_as_if_never_cut(served):
    server, codec = served
    ids = answer(server, codec, *MOVES)
    ref = play(server, build_env("sokoban", **SOKOBAN), codec, seed=4)

    answer(server, codec, MOVES[0])
    server.inject(Fault("abort", token_ids=tuple(ids[1]), size=3))
    cut = play(server, build_env("sokoban", **SOKOBAN), codec, seed=4)
    assert cut.status is Status.ABORTED and cut.resume is not None and cut.resume_error is None
    assert cut.resume["cut"] == 3 and len(cut.resume["turns"]) == 1

    request = kept_by_a_trainer(cut)
    rebuilt = rebuild(request, codec)
    assert rebuilt.traj.tokens == cut.tokens and rebuilt.traj.loss_mask == cut.loss_mask
    assert rebuilt.traj.log_probs == cut.log_probs
    assert [(m["role"], m.get("token_ids")) for m in rebuilt.traj.messages] == [
        (m["role"], m.get("token_ids")) for m in cut.messages
    ]
    assert [p.key for p in rebuilt.traj.images] == [p.key for p in cut.images]

    start = len(server.requests)
    answer(server, codec, codec.decode(ids[1][3:-1]), MOVES[2])
    resumed = play(server, build_env("sokoban", **SOKOBAN), codec, resume=request)
    assert len(server.requests) - start == 2
    assert resumed.tokens == ref.tokens and resumed.loss_mask == ref.loss_mask
    assert resumed.log_probs == pytest.approx(ref.log_probs, abs=1e-5)
    assert [t.model_text for t in resumed.turns] == [t.model_text for t in ref.turns]
    assert [t.metrics for t in resumed.turns] == [t.metrics for t in ref.turns]
    # where each turn stood: the kept turn from the resume state, the others from the restored env
    assert [turn_standing(t) for t in resumed.turns] == [turn_standing(t) for t in ref.turns]
    assert all(t.state_key is not None and t.distance_to_goal is not None for t in ref.turns)
    assert resumed.status is ref.status and resumed.reward == ref.reward and resumed.template_check.ok
    assert (resumed.kept.turns, resumed.kept.response_tokens) == (1, cut.response_length)
    assert_trainer_invariants(resumed, codec)


def test_an_env_that_cannot_be_snapshot_leaves_no_resume_state_and_says_why(served):
    server, codec = served
    server.inject(Fault("abort"))
    traj = play(server, ColorsEnv(), codec, seed=None)  # reset without a seed it can name
    assert traj.status is Status.ABORTED and traj.resume is None
    assert traj.resume_error.startswith("snapshot: SnapshotError: ")


def test_a_resume_state_under_a_windowed_history_is_refused(served):
    server, codec = served
    answer(server, codec, MOVES[0])
    server.inject(Fault("abort"))
    cut = play(server, build_env("sokoban", **SOKOBAN), codec, seed=4)

    async def main():
        async with SGLangEngine(server.url) as engine:
            config = EpisodeConfig(max_turns=3, history="window:1")
            env = build_env("sokoban", **SOKOBAN)
            return await run_episode(env, engine, codec, config=config, resume=kept_by_a_trainer(cut))

    traj = asyncio.run(main())
    assert traj.status is Status.FAILED and "resumes with the full history" in traj.error


def test_a_request_whose_images_do_not_fit_its_tokens_is_refused(served):
    server, codec = served
    answer(server, codec, MOVES[0])
    server.inject(Fault("abort"))
    cut = play(server, build_env("sokoban", **SOKOBAN), codec, seed=4)
    request = kept_by_a_trainer(cut)
    with pytest.raises(ResumeError, match="images"):
        rebuild(ResumeRequest(**{**request.__dict__, "images": request.images[:-1]}), codec)


def test_segments_after_cuts_across_a_segment():
    segments = [Segment((1, 2, 3), (-0.1, -0.2, -0.3), True), Segment((4, 5), None, False)]
    assert segments_after(segments, 0) == segments
    assert segments_after(segments, 2) == [Segment((3,), (-0.3,), True), segments[1]]
    assert segments_after(segments, 4) == [Segment((5,), None, False)]
    assert segments_after(segments, 5) == []


def test_the_contract_lets_kept_tokens_keep_their_log_probs_under_a_zeroed_mask():
    space = TokenSpace(vocab_size=100)
    response, mask, log_probs = [5, 6, 7, 8], [0, 0, 0, 1], [-0.5, 0.0, -0.25, -0.1]
    assert token_violations([1], response, mask, log_probs, [], None, space, kept=3) == []
    assert token_violations([1], response, mask, log_probs, [], None, space, kept=0) != []
    beyond = [0, 0, 0, 0]  # a zeroed mask past the kept tokens is still a violation
    assert token_violations([1], response, beyond, log_probs, [], None, space, kept=3) != []
