"""The slime hook with ``vlm_envs_ray_actors`` in the YAML, end to end through the SGLang test server
on a real two-node cluster: the same Samples as in process, every one within the Sample contract."""

import asyncio

import pytest
import torch
from partial_helpers import PARAMS, answer, assert_same_episode, interrupted, partial_args
from rollout_helpers import slime_args
from slime.rollout.sglang_rollout import GenerateState, generate_and_rm
from slime.utils.types import Sample

from vlm_envs.rollout import slime as hook
from vlm_envs.rollout.contract import sample_violations
from vlm_envs.testing import Fault

SOKOBAN = {"env_config": {"grid_size": [6, 6], "num_boxes": 1}}
#: Two actors sharing the two one-CPU nodes with the other Ray tests' pools.
RAY = {"vlm_envs_ray_actors": 2, "vlm_envs_ray_actor_cpus": 0.25}


@pytest.fixture(autouse=True)
def fresh_state():
    GenerateState.forget()
    yield
    GenerateState.forget()


def make_args(server, **overrides):
    """slime's args for these tests: short replies, Sokoban, no template check (as a user runs it)."""
    return slime_args(
        server,
        rollout_max_response_len=64,
        rollout_interaction_env_path="sokoban",
        vlm_envs_check_template=False,
        **overrides,
    )


def generate_all(args, samples, during=None):
    """Every sample through the hook on one loop (as slime's rollout does); ``during`` runs beside."""
    params = {"temperature": 1.0, "max_new_tokens": 64}

    async def main():
        try:
            tasks = [asyncio.ensure_future(hook.generate(args, s, params)) for s in samples]
            if during is not None:
                await during(args)
            return await asyncio.wait_for(asyncio.gather(*tasks), timeout=240)
        finally:
            await hook.close()

    return asyncio.run(main())


def test_ray_actors_fill_the_same_samples_as_in_process(ray_cluster, served):
    server, codec = served
    filled = {}
    for mode, yaml in (("local", {}), ("ray", RAY)):
        GenerateState.forget()
        samples = [Sample(index=i, group_index=20 + i, metadata=dict(SOKOBAN)) for i in range(6)]
        filled[mode] = generate_all(make_args(server, max_turns=3, **yaml), samples)
    for local, remote in zip(filled["local"], filled["ray"], strict=True):
        assert remote.status in (Sample.Status.COMPLETED, Sample.Status.TRUNCATED), remote.metadata
        assert sample_violations(remote, codec.token_space) == []
        for name in ("tokens", "response", "response_length", "loss_mask", "status", "reward"):
            assert getattr(remote, name) == getattr(local, name), name
        assert remote.rollout_log_probs == pytest.approx(local.rollout_log_probs, abs=1e-6)
        for key in ("pixel_values", "image_grid_thw"):
            assert torch.equal(remote.multimodal_train_inputs[key], local.multimodal_train_inputs[key])
        assert remote.metadata["vlm_envs"]["turns"] == local.metadata["vlm_envs"]["turns"] or [
            t["metrics"] for t in remote.metadata["vlm_envs"]["turns"]
        ] == [t["metrics"] for t in local.metadata["vlm_envs"]["turns"]]


def test_the_hooks_actors_run_on_both_nodes(ray_cluster, served):
    import ray

    server, _ = served
    nodes = []

    async def look(args):
        await asyncio.sleep(0.5)
        (executor,) = hook._runtime.executors.values()
        nodes.extend(await asyncio.get_running_loop().run_in_executor(None, executor.node_ids))

    samples = [Sample(index=i, metadata=dict(SOKOBAN)) for i in range(4)]
    out = generate_all(make_args(server, max_turns=2, **RAY), samples, during=look)
    assert all(sample_violations(s, served[1].token_space) == [] for s in out)
    assert set(nodes) == {n["NodeID"] for n in ray.nodes() if n["Alive"]} and len(set(nodes)) == 2


def test_slimes_abort_reaches_episodes_on_actors(ray_cluster, served):
    server, codec = served
    stay = (*codec.tokenize("<answer>Jump</answer>"), codec.end_of_turn_id)  # not a move: nothing changes
    server.inject(Fault("tokens", token_ids=stay), times=10_000)
    long_play = {"env_config": {**SOKOBAN["env_config"], "max_steps": 1000}}

    args = make_args(server, max_turns=1000, **RAY)
    params = {"temperature": 1.0, "max_new_tokens": 200_000}  # the whole response's budget, too

    async def main():
        try:  # two short samples bring both actors up; then four long ones, aborted a second in
            warm = [Sample(index=9 + i, metadata={**SOKOBAN, "max_turns": 1}) for i in range(2)]
            await asyncio.gather(*(hook.generate(args, s, params) for s in warm))
            samples = [Sample(index=i, metadata=dict(long_play)) for i in range(4)]
            tasks = [asyncio.ensure_future(hook.generate(args, s, params)) for s in samples]
            await asyncio.sleep(1)
            GenerateState(args).aborted = True
            return await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)
        finally:
            await hook.close()

    out = asyncio.run(main())
    for sample in out:
        record = sample.metadata["vlm_envs"]
        assert sample.status is Sample.Status.ABORTED, record["error"]
        assert 0 < record["num_turns"] < 1000 and sample_violations(sample, codec.token_space) == []


def test_a_sample_slime_aborted_resumes_on_actors_as_if_never_cut(ray_cluster, served):
    """``--partial-rollout`` with the episodes on actors: the resume state travels with the job, the
    actor restores the env and goes on from the tokens SGLang returned; the Sample equals the
    uninterrupted one played in process."""
    server, codec = served
    ids = [[*codec.tokenize(f"<answer>{m}</answer>"), codec.end_of_turn_id] for m in ("Up", "Left", "Down")]

    def new():
        return Sample(index=0, group_index=3, metadata={"seed": 5, **SOKOBAN})

    async def main():
        try:
            answer(server, ids)
            ref = await generate_and_rm(partial_args(server, True, max_turns=3), new(), dict(PARAMS))
            args = partial_args(server, True, max_turns=3, **RAY)
            start = len(server.requests)
            answer(server, ids[:1])
            server.inject(Fault("abort", token_ids=tuple(ids[1]), size=4))
            back = await interrupted(server, args, new(), start + 2)
            kept = back.response_length
            answer(server, [ids[1][4:], ids[2]])
            return ref, await generate_and_rm(args, back, dict(PARAMS)), kept
        finally:
            await hook.close()

    ref, resumed, kept = asyncio.run(main())
    assert resumed.metadata["vlm_envs"]["resumed"]["turns"] == 1
    assert_same_episode(resumed, ref, codec, kept, masked=True)
