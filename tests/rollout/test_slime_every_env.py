"""Every registered env's ``vlm-envs make-dataset ENV`` rows (slime's layout, read as slime's Dataset
reads them) play a won episode through the slime hook, with the YAML make-dataset wrote as slime's args,
within the Sample contract. Geo3k's rows are tasks (problem, images, answer; no seed); every other
env's rows name a seed."""

from __future__ import annotations

import asyncio

import datasets
import pytest
import yaml
from rollout_helpers import assert_sample_invariants, script, slime_args
from row_helpers import oracle_replies, row_images, user_message
from slime.rollout.sglang_rollout import GenerateState
from slime.utils.types import Sample

from vlm_envs import list_envs
from vlm_envs.cli import main
from vlm_envs.rollout import slime as hook

SEED = 3


@pytest.fixture(autouse=True)
def fresh_state():
    GenerateState.forget()
    yield
    GenerateState.forget()


#: Every env's default rows; and Geo3k with a config, whose rows are seeded episodes, not tasks.
CASES = [(spec.name, []) for spec in list_envs()] + [("geo3k", ["--config", "max_turns=4"])]


@pytest.mark.parametrize(("env", "options"), CASES)
def test_every_envs_slime_rows_win_through_the_hook(served, env, options, tmp_path):
    server, codec = served
    out = tmp_path / f"{env}.parquet"
    assert main(["make-dataset", env, "-n", "1", "--seed", str(SEED), "--out", str(out), *options]) == 0
    (row,) = datasets.Dataset.from_parquet(str(out)).to_list()
    images = row_images(row)
    sample = Sample(  # as slime's Dataset makes it with apply_chat_template
        index=0,
        prompt=codec.render(user_message(row["problem"], images), add_generation_prompt=True),
        label=row["answer"],
        multimodal_inputs={"images": images, "videos": None},
        metadata={k: v for k, v in row["metadata"].items() if v is not None},
    )
    seed = sample.metadata.get("seed")
    task = None if seed is not None else sample  # a row without a seed is its own task
    replies = oracle_replies(env, seed, sample=task, **sample.metadata.get("env_config", {}))
    script(server, codec, *replies)
    args = slime_args(
        server, rollout_max_response_len=4096, **yaml.safe_load(out.with_suffix(".yaml").read_text())
    )

    async def one() -> Sample:
        try:
            return await hook.generate(args, sample, {"temperature": 1.0, "max_new_tokens": 4096})
        finally:
            await hook.close()

    out = asyncio.run(one())
    record = out.metadata["vlm_envs"]
    assert out.status is Sample.Status.COMPLETED, record["error"]
    assert record["env"] == env and out.reward == 1.0 and record["num_turns"] == len(replies)
    assert record["template_check"] is True
    assert_sample_invariants(out, codec)
