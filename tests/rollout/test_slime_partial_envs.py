"""Every registered env resumes under slime's ``--partial-rollout``: its ``make-dataset`` row (as slime's
Dataset reads it) plays a won episode through the hook; the same episode, cut inside its middle turn
(the engine returns half that reply on slime's abort) and handed back with the mask zeroed
(``--mask-offpolicy-in-partial-rollout``), ends equal to the uninterrupted one."""

from __future__ import annotations

import asyncio

import datasets
import pytest
import yaml
from partial_helpers import assert_same_episode, interrupted
from rollout_helpers import slime_args
from row_helpers import oracle_replies, row_images, user_message
from slime.rollout.sglang_rollout import GenerateState, generate_and_rm
from slime.utils.types import Sample

from vlm_envs import list_envs
from vlm_envs.cli import main
from vlm_envs.rollout import slime as hook
from vlm_envs.testing import Fault

SEED = 3
PARAMS = {"temperature": 1.0, "max_new_tokens": 4096}


@pytest.fixture(autouse=True)
def fresh_state():
    GenerateState.forget()
    yield
    GenerateState.forget()


@pytest.mark.parametrize("env", [spec.name for spec in list_envs()])
def test_every_env_resumes_a_cut_episode_as_if_never_cut(served, env, tmp_path):
    server, codec = served
    out = tmp_path / f"{env}.parquet"
    assert main(["make-dataset", env, "-n", "1", "--seed", str(SEED), "--out", str(out)]) == 0
    (row,) = datasets.Dataset.from_parquet(str(out)).to_list()
    images = row_images(row)

    def sample() -> Sample:  # as slime's Dataset makes it with apply_chat_template
        return Sample(
            index=0,
            prompt=codec.render(user_message(row["problem"], images), add_generation_prompt=True),
            label=row["answer"],
            multimodal_inputs={"images": list(images), "videos": None},
            metadata={k: v for k, v in row["metadata"].items() if v is not None},
        )

    seed = sample().metadata.get("seed")
    texts = oracle_replies(
        env, seed, sample=None if seed is not None else sample(), **row["metadata"].get("env_config") or {}
    )
    ids = [[*codec.tokenize(text), codec.end_of_turn_id] for text in texts]
    cut_turn = len(ids) // 2
    partial = len(ids[cut_turn]) // 2
    args = slime_args(
        server,
        rollout_max_response_len=PARAMS["max_new_tokens"],
        custom_generate_function_path="vlm_envs.rollout.slime.generate",
        partial_rollout=True,
        mask_offpolicy_in_partial_rollout=True,
        **yaml.safe_load(out.with_suffix(".yaml").read_text()),
    )

    def answer(replies):
        for reply in replies:
            server.inject(Fault("tokens", token_ids=tuple(reply)))

    async def scenario():
        answer(ids)
        ref = await generate_and_rm(args, sample(), dict(PARAMS))
        start = len(server.requests)
        answer(ids[:cut_turn])
        server.inject(Fault("abort", token_ids=tuple(ids[cut_turn]), size=partial))
        back = await interrupted(server, args, sample(), start + cut_turn + 1, PARAMS)
        assert back.metadata["vlm_envs"]["resume"] is not None, back.metadata["vlm_envs"]["resume_error"]
        kept = back.response_length
        start = len(server.requests)
        answer([ids[cut_turn][partial:], *ids[cut_turn + 1 :]])
        resumed = await generate_and_rm(args, back, dict(PARAMS))
        assert len(server.requests) - start == len(ids) - cut_turn  # none for the turns kept
        return ref, resumed, kept

    async def one():
        try:
            return await scenario()
        finally:
            await hook.close()

    ref, resumed, kept = asyncio.run(one())
    assert ref.status is Sample.Status.COMPLETED and ref.reward == 1.0, ref.metadata["vlm_envs"]["error"]
    assert_same_episode(resumed, ref, codec, kept, masked=True)
    assert resumed.metadata["vlm_envs"]["resumed"]["turns"] == cut_turn
