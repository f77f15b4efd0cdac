import json

import pytest
from toyenvs import broken
from toyenvs.colors import ColorsEnv

from vlm_envs import build_env
from vlm_envs.checker import (
    HOSTILE_RESPONSES,
    LARGE_SEED,
    NON_TEXT_RESPONSES,
    EnvCheckError,
    check_env,
    determinism_seeds,
    episode_fingerprint,
)
from vlm_envs.checker.calls import RAISE_HINT, UNICODE_DIGITS, lookalike_probes

CHECK_NAMES = {"types", "determinism", "unseeded resets", "hostile replies", "step after the end"}
CHECK_NAMES |= {"malformed replies end"}
CHECK_NAMES |= {"oracle", "close", "snapshot", "state signals", "rebuild"}
HOSTILE = "hostile replies: "


def failures_of(env, **kwargs) -> list[str]:
    with pytest.raises(EnvCheckError) as err:
        check_env(env, **kwargs)
    return err.value.failures


def test_a_good_env_passes_including_rebuild_and_snapshots_in_another_process():
    assert check_env(build_env("toyenvs.colors"))[-2:] == ["snapshot", "rebuild"]


def test_hostile_corpus_covers_the_required_kinds():
    corpus = HOSTILE_RESPONSES
    assert corpus["empty"] == ""
    assert len(corpus["1 MB of text"]) >= 1 << 20
    assert "\x00" in corpus["null bytes"]
    assert "\u202e" in corpus["right-to-left override"]
    assert "<tool_call>" in corpus["malformed tool JSON"]


def test_non_deterministic_reset_is_caught_on_several_seeds():
    found = failures_of(broken.UnseededReset(), rebuild=False)
    differ = [f for f in found if f.startswith("determinism: Two episodes with seed=") and "differ" in f]
    # each seed's two episodes may collide by chance (1 in 4 colours x 784 positions): most are caught
    assert len(differ) >= 3 and any(f"seed={LARGE_SEED} " in f for f in found), found
    assert all(f.endswith("keep no random state across resets.") for f in differ), differ


def test_the_determinism_seeds_include_the_largest_allowed():
    assert determinism_seeds(0) == (0, 1, 2, 2**64 - 1)
    assert determinism_seeds(2**64 - 2) == (2**64 - 2, 2**64 - 1, 0)


def test_a_seed_that_numpy_legacy_rejects_is_caught():
    found = failures_of(broken.LegacyNumpySeed(), rebuild=False)
    assert [f for f in found if f.startswith("determinism:")] == [
        f"determinism: The episode of seed={2**64 - 1} raised ValueError: Seed must be between 0 and "
        "2**32 - 1. Accept every seed in [0, 2**64): numpy.random.default_rng and random.Random take them "
        "all, numpy.random.seed and RandomState stop at 2**32."
    ], found


def test_unseeded_resets_that_replay_one_episode_are_caught():
    found = failures_of(broken.UnseededReplaysSeedZero(), rebuild=False)
    assert found == [
        "unseeded resets: 8 resets without a seed all gave the same first observation, though the seeds "
        f"0, 1, 2, {2**64 - 1} give different ones. Without a seed, continue from the last one: after "
        "reset(seed=s), reset() plays seed s + 1, then s + 2 (vlm_envs.envs.config.EpisodeSeeds does this; "
        "before any seed, draw one at random)."
    ]


def test_an_env_whose_episode_is_fixed_may_replay_it_without_a_seed():
    check_env(build_env("geo3k", problem="<image>Find x.", answer="12", images=[_square()]), rebuild=False)


def _square():
    from PIL import Image

    return Image.new("RGB", (16, 16), "white")


def test_images_missing_from_the_message_are_caught():
    found = failures_of(broken.DropsImages(), rebuild=False)
    assert any("0 image part(s) for 1 observation image(s)" in f for f in found), found


def test_images_that_differ_from_the_observation_are_caught():
    found = failures_of(broken.SwapsImages(), rebuild=False)
    assert any("does not hold the observation's image 0" in f for f in found), found


def test_attached_bytes_of_another_picture_are_caught():
    found = failures_of(broken.AttachesOtherBytes(), rebuild=False)
    assert any("image 0's attached PNG (attach_png) does not decode" in f for f in found), found


def test_a_step_that_raises_on_garbage_is_caught():
    found = failures_of(broken.RaisesOnGarbage(), rebuild=False)
    assert any(
        f.startswith("hostile replies: step(malformed tool JSON) raised JSONDecodeError") for f in found
    )
    assert any(f.startswith("hostile replies: step(unclosed tool call) raised") for f in found), found
    assert not any("step(empty)" in f for f in found), found


def test_placeholder_replies_are_probed_and_non_text_never_reaches_step():
    found = failures_of(broken.RaisesOnPlaceholder(), rebuild=False)
    prefix = "hostile replies: step(image placeholder injection) raised ValueError: text has 1 <image>"
    placeholder = [f for f in found if f.startswith(prefix)]
    assert len(placeholder) == 1 and "Observation.compose(" in placeholder[0], found
    assert not any("step(None)" in f or "bytes)" in f for f in found), found  # refused before step runs


def test_an_env_that_answers_non_text_replies_fails_the_check():
    found = failures_of(broken.AcceptsNonText(), rebuild=False)
    refused = [f for f in found if "was answered, not refused with TypeError" in f]
    assert [f.split(")")[0] for f in refused] == [f"hostile replies: step({k}" for k in NON_TEXT_RESPONSES]
    assert all("Define step as a method of your Env subclass" in f for f in refused), refused


def test_the_env_own_replies_are_probed_with_digits_and_letters_of_other_scripts():
    found = failures_of(broken.IndexesAnyDigit(), rebuild=False)
    probes = [f.split(" raised")[0] for f in found if "ValueError: substring not found" in f]
    assert probes == [
        "hostile replies: step(the random reply with Arabic-Indic digits)",
        "hostile replies: step(the random reply with fullwidth digits)",
    ], found
    assert lookalike_probes(broken.IndexesAnyDigit(), 0) == {
        f"the random reply with {family} digits": f"<answer>{digits[3]}</answer>"
        for family, digits in UNICODE_DIGITS.items()
    }


def test_a_pydantic_error_is_quoted_whole_with_a_hint_that_points_to_compose():
    found = failures_of(broken.SlotsFromReply(), rebuild=False)
    (message,) = [f for f in found if "step(image placeholder injection)" in f]
    assert message.startswith(
        "hostile replies: step(image placeholder injection) raised ValidationError: Value error, 3 image "
        "slot(s) for 0 image(s): give one slot per image, or none (images first); Observation.compose(...) "
        "places them for you. A reply is untrusted text. Observation text is literal"
    ), message
    assert "errors.pydantic.dev" not in message and "never read <image> in model text" in message
    assert message.endswith(
        "(Observation.with_placeholders and from_dict are for trusted dataset text only)."
    )


def test_every_message_names_its_check_and_ends_as_a_sentence():
    found = failures_of(broken.RaisesOnGarbage(), rebuild=False)
    assert all(f.split(": ", 1)[0] in CHECK_NAMES and f.endswith(".") for f in found), found


def test_an_oracle_that_loses_is_caught():
    found = failures_of(broken.LosingOracle(), rebuild=False)
    assert any(f.startswith("oracle: The oracle lost the episode of seed=0") for f in found), found


@pytest.mark.parametrize("name", ["sokoban", "geo3k"])
def test_the_built_in_oracles_win(name):
    env = build_env(name)
    check_env(env, rebuild=False)
    env.reset(seed=5)
    assert env.oracle_response() is not None


def test_a_step_that_hangs_is_caught_in_bounded_time():
    found = failures_of(broken.HangsOnLongInput(), rebuild=False, step_timeout=0.5)
    assert any("step(1 MB of text) did not return within 0.5 s. Bound the work" in f for f in found), found


class FloatsItsToolArguments(ColorsEnv):
    """A zoom tool that converts its bbox with float(), as ZoomSearch once did."""

    def tools(self):
        schema = {"type": "object", "properties": {"bbox": {"type": "array"}}}
        return [{"type": "function", "function": {"name": "zoom", "parameters": schema}}]

    def step(self, response_text: str):
        if response_text.startswith("<tool_call>"):
            call = json.loads(response_text.removeprefix("<tool_call>").removesuffix("</tool_call>"))
            bbox = call["arguments"]["bbox"]
            [float(v) for v in (bbox if isinstance(bbox, list) else [bbox])]
        return super().step(response_text)


def test_the_env_s_own_tools_are_called_with_huge_numbers():
    found = failures_of(FloatsItsToolArguments(), rebuild=False)
    assert any(
        f.startswith("hostile replies: step(tool 'zoom' given 99999999 in a list) raised OverflowError")
        for f in found
    ), found
    assert check_env(ColorsEnv(), rebuild=False)  # no tools: no tool probes


class EndlessOnGarbage(ColorsEnv):
    """Like FogMaze and Sokoban once were: a reply without an answer costs no turn."""

    def step(self, response_text: str):
        if "<answer>" not in response_text or "<answer></answer>" in response_text:
            self._turn -= 1
        return super().step(response_text)


def test_an_episode_that_malformed_replies_never_end_is_caught():
    found = failures_of(EndlessOnGarbage(), rebuild=False)
    assert [f for f in found if f.startswith("malformed replies end: ")] == [
        "malformed replies end: The episode did not end within 1000 malformed replies "
        "('<answer></answer><tool_call></tool_call>'). Cap the turns, malformed ones included (a max_turns, "
        "or a cap on invalid replies)."
    ], found


def test_step_after_end_must_raise():
    found = failures_of(broken.NeverRaisesAfterEnd(), rebuild=False)
    assert "step after the end: step() after the episode ended did not raise. Raise " in "".join(found)


def test_hash_seeded_env_is_caught_by_the_rebuild_in_another_process():
    env = build_env("toyenvs.broken:HashSeeded")
    found = failures_of(env)
    assert any(f.startswith("rebuild: ") and "PYTHONHASHSEED" in f and "hash()" in f for f in found), found


def test_a_restore_that_forgets_the_turns_taken_is_caught_with_the_turn_and_the_field():
    expected = (
        "snapshot: The snapshot at turn 1, restored {where}, differs at turn 3 (the next step) in 'done': "
        "True uninterrupted, False restored. Make restore() give back the whole episode"
    )
    local = failures_of(broken.ForgetsTurnsTaken(), rebuild=False)
    assert len(local) == 1 and local[0].startswith(expected.format(where="in this process")), local
    found = failures_of(build_env("toyenvs.broken:ForgetsTurnsTaken"))
    assert len(found) == 1 and found[0].startswith(expected.format(where="in another process")), found


def test_nan_reward_is_caught():
    found = failures_of(broken.NanReward(), rebuild=False)
    assert any("reward nan is not finite" in f for f in found), found


def test_fingerprint_depends_on_images_and_seed():
    env = ColorsEnv()
    assert episode_fingerprint(env, 1) == episode_fingerprint(env, 1)
    assert len({episode_fingerprint(env, seed) for seed in range(6)}) > 1


def test_the_checker_drives_an_episode_as_long_as_any_turn_cap_a_config_validates():
    env = build_env("tower_of_hanoi", disks=10)  # 512 turns: once past the checker's 500 steps
    assert env.config.turn_limit == 512
    check_env(env, rebuild=False)


def test_an_env_that_says_where_it_stands_passes_the_state_signals_check():
    assert check_env(build_env("toyenvs.colors:StatedColorsEnv"))[-3:] == [
        "snapshot",
        "state signals",
        "rebuild",
    ]
    assert "state signals" not in check_env(ColorsEnv(), rebuild=False)  # says nothing: nothing checked


def test_a_signal_that_raises_or_has_the_wrong_type_is_caught():
    found = failures_of(broken.KeyRaises(), rebuild=False)
    assert found == [
        "state signals: The check itself stopped: the env raised RuntimeError: the key store is down. "
        + RAISE_HINT
    ], found
    found = failures_of(broken.DistanceAsText(), rebuild=False)
    assert found and all(f.startswith("state signals: distance_to_goal() gave '") for f in found), found


def test_a_key_that_counts_turns_is_caught_as_no_state_coming_back():
    found = failures_of(broken.KeyCountsTurns(), rebuild=False)
    assert len(found) == 1 and found[0].startswith(
        "state signals: No state came back at another turn in 3 episodes of malformed and random replies"
    ), found


def test_a_distance_that_the_oracle_does_not_lower_by_one_is_caught():
    found = failures_of(broken.DistanceSkips(), rebuild=False)
    assert found == [
        f"state signals: With seed={seed} the oracle's turn 1 took the distance from 2 to 0, not 1: count "
        "the turns an optimal player (the oracle) needs."
        for seed in (0, 1)
    ], found


def test_equal_keys_of_unequal_states_are_caught():
    found = failures_of(broken.KeyForgetsTheSquare(), rebuild=False)
    assert found and all(f.startswith("state signals: The key ") and "another text" in f for f in found), (
        found
    )


def test_a_key_that_changes_with_the_process_is_caught():
    found = failures_of(build_env("toyenvs.broken:HashKeyed"))
    assert [f for f in found if "in another process" in f] == [
        next(f for f in found if f.startswith("state signals: With seed=0, state_key() at turn 0 differs"))
    ], found
