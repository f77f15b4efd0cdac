"""Geo3kEnv: the tool protocol, final answers, rewards and metrics, building from samples, conformance."""

import asyncio
import json
import random
import threading
import time
from types import SimpleNamespace

import pytest
from PIL import Image
from slime.utils.types import Sample

from vlm_envs import EpisodeFinishedError, build_env
from vlm_envs.checker import check_env
from vlm_envs.envs.geo3k import Geo3kEnv, Geo3kProblem
from vlm_envs.envs.geo3k.tool_calls import EXAMPLE_CALL

DIAGRAM = Image.new("RGB", (56, 56), "white")
PROBLEM = Geo3kProblem(text="<image>Find x.", answer="2\\sqrt{3}", images=(DIAGRAM,), source="test", id="p1")


def call(answer, name="calc_score") -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": {"answer": answer}}) + "</tool_call>"


def make(max_turns=3, problem=PROBLEM) -> Geo3kEnv:
    env = Geo3kEnv(problem=problem, max_turns=max_turns)
    env.reset(0)
    return env


def test_first_observation_holds_the_diagram_the_problem_and_tool_instructions():
    env = Geo3kEnv(problem=PROBLEM, max_turns=4)
    obs, info = env.reset(0)
    assert obs.role == "user" and obs.images == [DIAGRAM]
    assert obs.to_dict()["obs_str"].startswith("<image>Find x.")
    assert EXAMPLE_CALL in obs.text and "4 replies" in obs.text and "\\boxed{}" in obs.text
    assert info == {
        "problem": "<image>Find x.",
        "ground_truth": "2\\sqrt{3}",
        "kind": "dataset",
        "source": "test",
        "problem_id": "p1",
        "max_turns": 4,
    }
    assert env.system_prompt() is None
    assert env.reference_answer == "2\\sqrt{3}"


def test_wrong_then_right_tool_answer_then_boxed_final_answer():
    env = make()
    obs, done, info = env.step("Maybe 3? " + call("3"))
    assert (obs.role, done, info.reward) == ("tool", False, 0.0)
    assert "0.0" in obs.text and "'3' does not match" in obs.text
    assert info.metrics == {
        "turn": 1,
        "tool_calls": 1,
        "tool_call_errors": 0,
        "format_valid": True,
        "correct": False,
        "correct_turn": 0,
    }
    assert info.info["verdict_reason"] == "mismatch"
    obs, done, info = env.step(call("\\sqrt{12}"))
    assert not done and "1.0" in obs.text and "matches" in obs.text
    assert info.metrics["correct_turn"] == 2 and info.metrics["correct"]
    obs, done, info = env.step("So the answer is \\boxed{2\\sqrt{3}}.")
    assert done and info.terminated and not info.truncated
    assert obs.role == "user" and info.reward == 1.0 == env.episode_reward()
    assert info.metrics["tool_calls"] == 2 and info.metrics["format_valid"]
    assert info.info["final_answer"] == "2\\sqrt{3}" and info.info["verdict_reason"] == "equal"


def test_a_reply_without_tool_call_ends_the_episode():
    env = make()
    _, done, info = env.step("I think it is \\boxed{3.46}")  # rounded match of 2*sqrt(3) = 3.4641
    assert done and info.terminated and info.reward == env.episode_reward()
    env = make()
    _, done, info = env.step("no idea")
    assert done and info.reward == 0.0
    assert not info.metrics["format_valid"] and info.info["final_answer"] is None


def test_the_last_answer_counts_tool_or_boxed():
    env = make()
    env.step(call("2\\sqrt{3}"))
    _, done, info = env.step("Actually \\boxed{5}")
    assert done and info.reward == 0.0 and info.metrics["correct_turn"] == 1
    env = make()
    env.step(call("5"))
    _, _, info = env.step("no more tools, my answer stands")  # the last tool answer is the final answer
    assert info.info["final_answer"] == "5" and info.reward == 0.0
    env = make()
    env.step(call("2\\sqrt{3}"))
    _, _, info = env.step("done")
    assert info.reward == 1.0


def test_a_boxed_answer_after_the_call_supersedes_it_but_one_before_does_not():
    env = make()
    _, _, info = env.step(call("5") + " so \\boxed{2\\sqrt{3}}")
    assert info.info["final_answer"] == "2\\sqrt{3}" and info.metrics["correct"]
    assert info.info["tool_call"]["answer"] == "5"
    env = make()
    _, _, info = env.step("\\boxed{2\\sqrt{3}} let me check " + call("5"))
    assert info.info["final_answer"] == "5" and not info.metrics["correct"]


def test_the_env_never_takes_its_own_text_as_the_answer():
    problem = Geo3kProblem(text="<image>Find x. Write it like \\boxed{12}.", answer="12", images=(DIAGRAM,))
    env = make(problem=problem)
    env.step(call("1"))
    _, _, info = env.step("I give up.")
    assert info.info["final_answer"] == "1" and info.reward == 0.0
    env = make(problem=problem)
    _, _, info = env.step("I give up.")
    assert info.info["final_answer"] is None and info.reward == 0.0


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ('<tool_call>{"name": "calc_score", "arguments": {"answer": 3</tool_call>', "not valid JSON"),
        (call("3", name="calculator"), "no tool named 'calculator'"),
        ('<tool_call>{"name": "calc_score", "arguments": {}}</tool_call>', '"answer" argument is missing'),
    ],
)
def test_a_bad_call_gets_a_tool_observation_saying_what_was_wrong_and_how_to_call(reply, says):
    env = make()
    obs, done, info = env.step(reply)
    assert not done and obs.role == "tool"
    assert says in obs.text and EXAMPLE_CALL in obs.text
    assert info.metrics["tool_call_errors"] == 1 and not info.metrics["format_valid"]
    assert info.info["tool_call"]["status"] != "ok" and info.info["tool_call_error"]


def test_the_turn_before_the_last_warns_and_the_last_turn_ends_the_episode():
    env = make(max_turns=3)
    obs, _, _ = env.step(call("1"))
    assert "one reply left" not in obs.text
    obs, _, _ = env.step(call("2"))
    assert "one reply left" in obs.text
    obs, done, info = env.step(call("2\\sqrt{3}"))
    assert done and info.truncated and not info.terminated
    assert info.reward == 1.0 and "reply limit" in obs.text
    with pytest.raises(EpisodeFinishedError):
        env.step("again")


def test_a_single_turn_episode_says_so_up_front():
    env = Geo3kEnv(problem=PROBLEM, max_turns=1)
    obs, _ = env.reset(0)
    assert "one reply left" in obs.text and "calc_score" not in obs.text
    _, done, info = env.step(call("2\\sqrt{3}"))
    assert done and info.truncated and info.reward == 1.0


def test_step_before_reset_raises_and_reset_starts_over():
    env = Geo3kEnv(problem=PROBLEM)
    with pytest.raises(EpisodeFinishedError):
        env.step("hi")
    env.reset(0)
    env.step("\\boxed{2\\sqrt{3}}")
    env.reset(1)
    assert env.episode_reward() == 0.0
    _, done, info = env.step(call("1"))
    assert not done and info.metrics["turn"] == 1


def test_astep_matches_step():
    sync_env, async_env = make(), make()
    replies = [call("3"), call("2\\sqrt{3}") + " \\boxed{7}", "fine, \\boxed{2\\sqrt{3}}"]

    async def run():
        return [await async_env.astep(r) for r in replies]

    async_results = asyncio.run(run())
    for reply, (obs_a, done_a, info_a) in zip(replies, async_results, strict=True):
        obs_s, done_s, info_s = sync_env.step(reply)
        assert (obs_s.text, done_s, info_s.metrics, info_s.reward) == (
            obs_a.text,
            done_a,
            info_a.metrics,
            info_a.reward,
        )


def test_envs_step_from_threads_and_asyncio_at_once():
    envs = [build_env("geo3k", max_turns=2) for _ in range(10)]
    for seed, env in enumerate(envs):
        env.reset(seed)
    rewards: dict[int, float] = {}

    def play(i):
        envs[i].step(call(envs[i].reference_answer))
        rewards[i] = envs[i].step("done")[2].reward

    async def aplay(i):
        await envs[i].astep(call("0"))
        rewards[i] = (await envs[i].astep(f"\\boxed{{{envs[i].reference_answer}}}"))[2].reward

    async def main():
        await asyncio.gather(*(aplay(i) for i in range(8, 10)))

    threads = [threading.Thread(target=play, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    asyncio.run(main())
    for t in threads:
        t.join(60)
    assert rewards == {i: 1.0 for i in range(10)}


def test_the_reference_policy_solves_generated_problems():
    env = build_env("geo3k")
    for seed in range(12):
        _, info = env.reset(seed)
        obs, done, _ = env.step(env.tool_call(env.reference_answer))
        assert "1.0" in obs.text, (info["problem"], info["ground_truth"])
        obs, done, step = env.step(f"\\boxed{{{env.reference_answer}}}")
        assert done and step.reward == 1.0 and step.metrics["correct_turn"] == 1


def test_generator_reset_is_seeded_and_none_moves_on():
    env = build_env("geo3k", kinds=["circle", "angle"], image_size=224)
    a, info_a = env.reset(5)
    b, _ = env.reset(5)
    assert a.text == b.text and a.images[0].tobytes() == b.images[0].tobytes()
    assert info_a["kind"] in ("circle", "angle") and info_a["source"] == "generator"
    assert a.images[0].size == (224, 224)
    texts = {env.reset()[1]["problem_id"] for _ in range(3)}
    assert texts == {"generator-6", "generator-7", "generator-8"}


def test_random_responses_never_break_an_episode():
    env = build_env("geo3k", max_turns=4)
    rng = random.Random(0)
    for seed in range(15):
        env.reset(seed)
        done = False
        while not done:
            _, done, info = env.step(env.random_response(rng))
            assert info.reward in (0.0, 1.0)


def test_tools_schema_is_openai_function_format():
    (tool,) = Geo3kEnv.tools()
    assert tool["type"] == "function" and tool["function"]["name"] == "calc_score"
    params = tool["function"]["parameters"]
    assert params["required"] == ["answer"] and params["properties"]["answer"]["type"] == "string"
    json.dumps(tool)


# -- building from samples and config ---------------------------------------------------------------


def test_build_from_a_dataset_row():
    row = {"problem": "<image>Find y.", "images": [DIAGRAM], "answer": "8.5", "id": 42}
    env = build_env("geo3k", sample=row)
    obs, info = env.reset(123)
    assert obs.images == [DIAGRAM] and obs.to_dict()["obs_str"].startswith("<image>Find y.")
    assert (info["ground_truth"], info["problem_id"]) == ("8.5", "42")
    assert env.step("\\boxed{8.5}")[2].reward == 1.0


def test_build_from_a_slime_sample_with_chat_messages_and_args():
    prompt = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Find z."}]},
    ]
    sample = Sample(prompt=prompt, label="\\frac{5}{2}", multimodal_inputs={"images": [DIAGRAM]})
    env = build_env("geo3k", sample=sample, args=SimpleNamespace(max_turns=5))
    obs, info = env.reset()
    assert (
        env.max_turns == 5
        and obs.to_dict()["obs_str"].startswith("<image>Find z.")
        and info["ground_truth"] == "\\frac{5}{2}"
    )
    assert env.step("\\boxed{2.5}")[2].reward == 1.0


def test_build_from_a_rendered_qwen_prompt_and_env_config_in_metadata():
    prompt = (
        "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n"
        "<|vision_start|><|image_pad|><|vision_end|>Find w.<|im_end|>\n<|im_start|>assistant\n"
    )
    sample = Sample(prompt=prompt, label="7", multimodal_inputs={"images": [DIAGRAM]})
    sample.metadata = {"env_config": {"max_turns": 2}}
    env = build_env("geo3k", sample=sample, args=SimpleNamespace(max_turns=9))
    obs, _ = env.reset()
    assert env.max_turns == 2 and obs.to_dict()["obs_str"].startswith("<image>Find w.")


def test_a_prompt_that_already_teaches_the_tool_is_not_taught_twice():
    text = "<image>Find x. Use calc_score via <tool_call>...</tool_call> to check."
    env = build_env("geo3k", problem=text, answer="3", images=[DIAGRAM])
    obs, _ = env.reset()
    assert obs.to_dict()["obs_str"] == text


def test_images_and_placeholders_are_reconciled():
    env = build_env("geo3k", problem="Find x.", answer="3", images=[DIAGRAM, DIAGRAM])
    obs, _ = env.reset()
    assert obs.to_dict()["obs_str"].startswith("<image><image>Find x.")
    env = build_env("geo3k", problem="<image>Find x.", answer="3")
    assert not env.reset()[0].to_dict()["obs_str"].count("<image>")


def test_bad_config_is_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="unknown config key"):
        build_env("geo3k", max_turn=3)
    with pytest.raises(ValueError, match="max_turns"):
        build_env("geo3k", max_turns=0)
    with pytest.raises(ValueError, match="needs a problem"):
        build_env("geo3k", sample=Sample(prompt="Find x."))
    with pytest.raises(ValueError, match="multiple of 28"):
        build_env("geo3k", image_size=300)


# -- conformance ------------------------------------------------------------------------------------


def test_check_env_generator():
    check_env(build_env("geo3k", max_turns=2), seed=3)


def test_check_env_fixed_problem():
    check_env(build_env("geo3k", problem="<image>Find x.", answer="12", images=[DIAGRAM]), rebuild=False)


HOSTILE_ANSWERS = {
    "exponent tower": "9^{9^{9^{9^{9}}}}",
    "nested fractions": "\\frac{1}{" * 80 + "2" + "}" * 80,
    "many digits": "1" * 900,
    "unbalanced braces": "\\frac{1}{{{{2",
    "null bytes": "1\x002\x00",
}


@pytest.mark.parametrize("answer", list(HOSTILE_ANSWERS.values()), ids=list(HOSTILE_ANSWERS))
def test_hostile_tool_answers_get_a_verdict_in_time(answer):
    env = Geo3kEnv(problem=PROBLEM, grade_timeout=1.0)
    env.reset(0)
    t0 = time.monotonic()
    obs, done, info = env.step(call(answer))
    assert time.monotonic() - t0 < 1.0 + 1.0
    assert not done and obs.role == "tool" and "0.0" in obs.text
    assert info.info["verdict_reason"] and not info.metrics["correct"]


def test_code_in_an_answer_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    payload = f"__import__('os').system('touch {marker}')"
    env = make()
    env.step(call(payload))
    env.step(f"\\boxed{{{payload}}}")
    assert not marker.exists()


@pytest.mark.parametrize("reply", ["The answer is \\boxed{<image>}", "<image><image>\\boxed{<|image_pad|>}"])
def test_a_quoted_placeholder_gets_feedback_not_an_error(reply):
    env = build_env("geo3k", problem="<image>Find x.", answer="12", images=[DIAGRAM])
    env.reset(seed=0)
    obs, done, info = env.step(reply)
    assert done and not obs.images and info.reward == 0.0
    assert "image" in obs.text and not info.metrics["correct"]
