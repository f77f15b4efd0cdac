"""A slime user's own envs, datasets and prompts under our hook: slime-shaped envs named the ways
slime's loader names them, the sample's prompt when the env gives none, and a mixed-env dataset."""

import asyncio
import functools
import io
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from PIL import Image
from rollout_helpers import assert_sample_invariants, assert_trainer_invariants, script, slime_args
from slime.rollout.sglang_rollout import GenerateState
from slime.utils.processing_utils import build_processor_kwargs
from slime.utils.types import Sample

from vlm_envs import build_env
from vlm_envs.rollout import slime as hook
from vlm_envs.rollout.engines.sglang import SGLangEngine
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.prompt import FallbackPrompt

SUPPORT = Path(__file__).parents[1] / "support"
QUESTION = "In the triangle shown, find x. Put the answer in \\boxed{}."


@pytest.fixture(autouse=True)
def fresh_state():
    GenerateState.forget()
    yield
    GenerateState.forget()


make_args = functools.partial(
    slime_args,
    apply_chat_template=True,
)


def run(args, *samples):
    async def one_loop():
        try:
            params = {"temperature": 1.0, "max_new_tokens": 1024}
            return [await hook.generate(args, s, params) for s in samples]
        finally:
            await hook.close()

    return asyncio.run(one_loop())


def diagram() -> Image.Image:
    """A picture whose size the processor changes (70x50 is not on its 28-pixel grid)."""
    image = Image.new("RGB", (70, 50), (250, 250, 250))
    image.paste((30, 30, 200), (10, 10, 40, 30))
    return image


def user_message(text: str, images: list) -> list[dict]:
    """The conversation slime's Dataset builds for a row with --multimodal-keys (images, then text)."""
    return [
        {
            "role": "user",
            "content": [*({"type": "image", "image": im} for im in images), {"type": "text", "text": text}],
        }
    ]


def slime_sample(codec, text: str, images: list, *, templated: bool, **fields) -> Sample:
    """A Sample as slime's Dataset makes it: the prompt templated under apply_chat_template, else messages."""
    messages = user_message(text, images)
    prompt = codec.render(messages, add_generation_prompt=True) if templated else messages
    return Sample(prompt=prompt, multimodal_inputs={"images": images, "videos": None}, **fields)


def slime_processor_call(codec, sample: Sample):
    """What slime's own generate path computes for a sample: one processor call on prompt + images."""
    text = (
        sample.prompt
        if isinstance(sample.prompt, str)
        else codec.render(sample.prompt, add_generation_prompt=True)
    )
    return codec.processor(text=text, **build_processor_kwargs(sample.multimodal_inputs))


@pytest.mark.parametrize("templated", [True, False], ids=["apply_chat_template", "message-list"])
def test_a_bare_module_env_plays_the_sample_prompt_encoded_as_slime_encodes_it(served, templated):
    server, codec = served
    args = make_args(
        server, rollout_interaction_env_path="slime_geo3k_env", max_turns=3, apply_chat_template=templated
    )
    sample = slime_sample(codec, QUESTION, [diagram()], templated=templated, index=0, label="42")
    script(server, codec, "x is \\boxed{7}.", "So \\boxed{42}.")
    (out,) = run(args, sample)
    record = out.metadata["vlm_envs"]
    assert out.status is Sample.Status.COMPLETED, record["error"]
    assert record["prompt_source"] == "sample" and record["template_check"] is True
    # the prompt ids and image tensors are exactly those of slime's processor call on this sample
    expected = slime_processor_call(codec, sample)
    prompt_ids = out.tokens[: len(out.tokens) - out.response_length]
    assert prompt_ids == list(expected["input_ids"][0])
    assert torch.equal(out.multimodal_train_inputs["pixel_values"], expected["pixel_values"])
    assert torch.equal(out.multimodal_train_inputs["image_grid_thw"], expected["image_grid_thw"])
    # the env's feedback is an observation in the response; its metrics are the step info's scalars
    assert out.loss_mask.count(0) > 0 and "wrong" in codec.decode(out.tokens[len(prompt_ids) :])
    assert [t["metrics"]["correct"] for t in record["turns"]] == [False, True]
    assert record["turns"][1]["metrics"]["turn"] == 2
    # no episode reward: slime's own reward model scores it, and the record says so
    assert out.reward is None and record["reward"] is None and record["reward_source"] == "slime"
    assert_sample_invariants(out, codec)


def test_an_env_whose_first_observation_is_the_prompt_ignores_the_sample_prompt(served, monkeypatch):
    server, codec = served
    monkeypatch.chdir(SUPPORT.parent)
    args = make_args(server, rollout_interaction_env_path="support/slime_image_env.py", max_turns=3)
    sample = slime_sample(codec, "ignored: the env shows its own first frame", [], templated=True, index=1)
    sample.group_index = 4
    script(server, codec, "<answer>red</answer>", "<answer>blue</answer>", "<answer>green</answer>")
    (out,) = run(args, sample)
    record = out.metadata["vlm_envs"]
    assert out.status is Sample.Status.COMPLETED, record["error"]
    assert record["prompt_source"] == "env" and record["template_check"] is True
    assert "ignored" not in codec.decode(out.tokens, skip_special_tokens=False)
    # one image per turn: the first frame in the prompt, one more with each observation but the last
    assert out.multimodal_train_inputs["image_grid_thw"].shape[0] == 3 == len(out.multimodal_inputs["images"])
    assert all(t["metrics"]["format_ok"] is True for t in record["turns"])
    assert record["reset_info"]["first_color"] in ("red", "green", "blue")
    assert out.reward is None and record["reward_source"] == "slime"
    assert_sample_invariants(out, codec)


def test_worker_processes_load_a_py_path_env_and_encode_the_sample_prompt_the_same(served):
    """The job carries the sample prompt to the worker, which loads the env from its file path."""
    server, codec = served
    path = str(SUPPORT / "slime_image_env.py")
    filled = []
    for workers in (0, 2):
        GenerateState.forget()
        args = make_args(
            server,
            rollout_interaction_env_path="slime_geo3k_env",
            vlm_envs_allowed_envs=[path],  # a row names a file only where the YAML lists it
            max_turns=2,
            vlm_envs_workers=workers,
        )
        prompted = slime_sample(codec, QUESTION, [diagram()], templated=True, index=2, label="5")
        framed = Sample(index=3, group_index=9, metadata={"env": path})
        script(server, codec, "\\boxed{4}", "\\boxed{5}", "<answer>red</answer>", "<answer>red</answer>")
        filled.append(run(args, prompted, framed))
    for local, remote in zip(*filled, strict=True):
        assert remote.metadata["vlm_envs"]["error"] is None, remote.metadata["vlm_envs"]
        for name in ("tokens", "response_length", "loss_mask", "status", "reward"):
            assert getattr(remote, name) == getattr(local, name), name
        for key in ("pixel_values", "image_grid_thw"):
            assert torch.equal(remote.multimodal_train_inputs[key], local.multimodal_train_inputs[key])
        assert remote.metadata["vlm_envs"]["prompt_source"] == local.metadata["vlm_envs"]["prompt_source"]
        assert_sample_invariants(remote, codec)
    assert [s.metadata["vlm_envs"]["prompt_source"] for s in filled[1]] == ["sample", "env"]


def test_run_episode_takes_the_fallback_prompt_only_for_an_empty_first_observation(served):
    server, codec = served
    args = SimpleNamespace(max_turns=2)
    fallback = FallbackPrompt(
        text=codec.render(user_message(QUESTION, [diagram()]), add_generation_prompt=True),
        images=(diagram(),),
    )
    for env_name, source in (("slime_geo3k_env", "sample"), ("slime_image_env", "env")):
        env = build_env(env_name, sample=SimpleNamespace(label="3"), args=args)
        script(server, codec, "\\boxed{1}", "\\boxed{3}")

        async def play(env):
            engine = SGLangEngine(server.url)
            try:
                return await run_episode(
                    env,
                    engine,
                    codec,
                    seed=1,
                    config=EpisodeConfig(max_turns=2, check_template=True),
                    fallback_prompt=fallback,
                )
            finally:
                await engine.close()

        traj = asyncio.run(play(env))
        assert traj.prompt_source == source and traj.template_check.ok, traj.error
        assert traj.reward_from_env is False
        assert_trainer_invariants(traj, codec)


def test_a_mixed_env_dataset_from_make_dataset_and_slime_rows(served, tmp_path):
    """One --prompt-data parquet: make-dataset's Sokoban rows plus rows for a slime-shaped env module."""
    datasets = pytest.importorskip("datasets")
    from vlm_envs.datasets.build import make_dataset

    server, codec = served
    files = make_dataset(
        "sokoban", 2, tmp_path / "ours.parquet", env_config={"grid_size": [6, 6], "num_boxes": 1}
    )
    ours = datasets.Dataset.from_parquet(str(files.parquet)).to_list()
    theirs = [
        {
            "problem": QUESTION,
            "images": [{"bytes": _png(diagram()), "path": None}],
            "answer": str(k),
            "metadata": {"env": "slime_geo3k_env"},
        }
        for k in (6, 7)
    ]
    mixed = tmp_path / "mixed.parquet"
    table = datasets.Dataset.from_list(ours + theirs).cast_column(
        "images", datasets.Sequence(datasets.Image())
    )
    table.to_parquet(str(mixed))
    samples = []
    for i, row in enumerate(
        datasets.Dataset.from_parquet(str(mixed)).to_list()
    ):  # as slime's Dataset reads it
        images = [Image.open(io.BytesIO(im["bytes"])).convert("RGB") for im in row["images"]]
        meta = {k: v for k, v in row["metadata"].items() if v is not None}
        samples.append(
            slime_sample(
                codec, row["problem"], images, templated=True, index=i, label=row["answer"], metadata=meta
            )
        )
    args = make_args(server, max_turns=2, vlm_envs_allowed_envs=["slime_geo3k_env"])
    for _ in samples:
        script(server, codec, "<answer>Up</answer>", "\\boxed{6}")
    out = run(args, *samples)
    records = [s.metadata["vlm_envs"] for s in out]
    assert [r["env"] for r in records] == ["sokoban", "sokoban", "slime_geo3k_env", "slime_geo3k_env"]
    assert [r["prompt_source"] for r in records] == ["env", "env", "sample", "sample"]
    assert [r["reward_source"] for r in records] == ["env", "env", "slime", "slime"]
    assert all(isinstance(s.reward, float) for s in out[:2]) and all(s.reward is None for s in out[2:])
    assert all(r["error"] is None and r["template_check"] is True for r in records), records
    for s in out:
        assert s.status is not Sample.Status.FAILED
        assert_sample_invariants(s, codec)


def _png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()
