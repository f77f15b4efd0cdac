"""Every registered env's ``vlm-envs make-dataset ENV`` rows (slime's layout, read as slime's Dataset
reads them) play a won episode through the slime hook, with the YAML make-dataset wrote as slime's args,
within the Sample contract; with a windowed history, every turn sample says where its turn stood, and
GiGPO's post-process takes them. Geo3k's rows are tasks (problem, images, answer; no seed); every other
env's rows name a seed."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

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
from vlm_envs.rollout.slime.gigpo import post_process_rewards

SEED = 3


@pytest.fixture(autouse=True)
def fresh_state():
    GenerateState.forget()
    yield
    GenerateState.forget()


#: The envs that give no distance to the goal (docs/envs.md: no exact solver for what the player sees).
NO_DISTANCE = {"minesweeper"}
#: Every env's default rows; and Geo3k with a config, whose rows are seeded episodes, not tasks.
CASES = [(spec.name, []) for spec in list_envs()] + [("geo3k", ["--config", "max_turns=4"])]


@pytest.mark.parametrize("history", ["full", "window:1"])
@pytest.mark.parametrize(("env", "options"), CASES)
def test_every_envs_slime_rows_win_through_the_hook(served, env, options, history, tmp_path):
    server, codec = served
    out = tmp_path / f"{env}.parquet"
    assert main(["make-dataset", env, "-n", "1", "--seed", str(SEED), "--out", str(out), *options]) == 0
    (row,) = datasets.Dataset.from_parquet(str(out)).to_list()
    images = row_images(row)
    sample = Sample(  # as slime's Dataset makes it with apply_chat_template
        group_index=0,
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
    written = yaml.safe_load(out.with_suffix(".yaml").read_text())
    args = slime_args(server, rollout_max_response_len=4096, vlm_envs_history=history, **written)

    async def one() -> Sample | list[Sample]:
        try:
            return await hook.generate(args, sample, {"temperature": 1.0, "max_new_tokens": 4096})
        finally:
            await hook.close()

    out = asyncio.run(one())
    samples = out if isinstance(out, list) else [out]
    assert len(samples) == (len(replies) if history != "full" else 1)
    for one_sample in samples:
        record = one_sample.metadata["vlm_envs"]
        assert one_sample.status is Sample.Status.COMPLETED, record["error"]
        assert record["env"] == env and one_sample.reward == 1.0 and record["num_turns"] == len(replies)
        assert_sample_invariants(one_sample, codec)
    if history == "full":
        assert samples[0].metadata["vlm_envs"]["template_check"] is True
        return
    records = [s.metadata["vlm_envs"] for s in samples]
    assert [r["turn"] for r in records] == list(range(len(replies)))
    distance = int if env not in NO_DISTANCE else type(None)
    for r in records:  # where each turn stood: its state and distance before, the distance after
        assert isinstance(r["state_key"], str) and r["state_key"].startswith("sha256:"), r
        assert all(isinstance(r[k], distance) for k in ("distance_to_goal", "next_distance_to_goal")), r
    assert records[-1]["next_distance_to_goal"] == (0 if env not in NO_DISTANCE else None)  # won
    gigpo = SimpleNamespace(advantage_estimator="grpo", vlm_envs_gigpo_gamma=0.5)
    raw, advantages = post_process_rewards(gigpo, samples)
    # one episode: no episode-level term; its turns act from distinct states (an oracle never comes back)
    assert raw == [1.0] * len(samples) and advantages == [0.0] * len(samples)
