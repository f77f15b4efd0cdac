import pytest
from toyenvs import broken
from toyenvs.colors import ColorsEnv

from vlm_envs import build_env
from vlm_envs.checker import HOSTILE_RESPONSES, EnvCheckError, check_env, episode_fingerprint


def failures_of(env, **kwargs) -> list[str]:
    with pytest.raises(EnvCheckError) as err:
        check_env(env, **kwargs)
    return err.value.failures


def test_a_good_env_passes_including_rebuild_in_another_process():
    check_env(build_env("toyenvs.colors"))


def test_hostile_corpus_covers_the_required_kinds():
    corpus = HOSTILE_RESPONSES
    assert corpus["empty"] == ""
    assert len(corpus["1 MB of text"]) >= 1 << 20
    assert "\x00" in corpus["null bytes"]
    assert "\u202e" in corpus["right-to-left override"]
    assert "<tool_call>" in corpus["malformed tool JSON"]


def test_non_deterministic_reset_is_caught():
    found = failures_of(broken.UnseededReset(), rebuild=False)
    assert any("seed=0" in f and "differ" in f for f in found), found


def test_images_missing_from_the_message_are_caught():
    found = failures_of(broken.DropsImages(), rebuild=False)
    assert any("0 image part(s) for 1 observation image(s)" in f for f in found), found


def test_images_that_differ_from_the_observation_are_caught():
    found = failures_of(broken.SwapsImages(), rebuild=False)
    assert any("does not hold the observation's image 0" in f for f in found), found


def test_a_step_that_raises_on_garbage_is_caught():
    found = failures_of(broken.RaisesOnGarbage(), rebuild=False)
    assert any(f.startswith("step(malformed tool JSON) raised JSONDecodeError") for f in found), found
    assert any(f.startswith("step(unclosed tool call) raised") for f in found), found
    assert not any(f.startswith("step(empty)") for f in found), found


def test_placeholder_and_non_text_replies_are_probed():
    found = failures_of(broken.RaisesOnPlaceholder(), rebuild=False)
    assert any(f.startswith("step(image placeholder injection) raised ValueError") for f in found), found
    assert any(f.startswith("step(invalid UTF-8 bytes) raised ValueError") for f in found), found
    assert not any(f.startswith("step(None)") for f in found), found


def test_an_oracle_that_loses_is_caught():
    found = failures_of(broken.LosingOracle(), rebuild=False)
    assert any("the oracle lost the episode of seed=0" in f for f in found), found


@pytest.mark.parametrize("name", ["sokoban", "geo3k"])
def test_the_built_in_oracles_win(name):
    env = build_env(name)
    check_env(env, rebuild=False)
    env.reset(seed=5)
    assert env.oracle_response() is not None


def test_a_step_that_hangs_is_caught_in_bounded_time():
    found = failures_of(broken.HangsOnLongInput(), rebuild=False, step_timeout=0.5)
    assert any("step(1 MB of text) did not return within 0.5 s" in f for f in found), found


def test_step_after_end_must_raise():
    found = failures_of(broken.NeverRaisesAfterEnd(), rebuild=False)
    assert any("after the episode ended did not raise" in f for f in found), found


def test_hash_seeded_env_is_caught_by_the_rebuild_in_another_process():
    env = build_env("toyenvs.broken:HashSeeded")
    found = failures_of(env)
    assert any("another process" in f and "PYTHONHASHSEED" in f for f in found), found


def test_nan_reward_is_caught():
    found = failures_of(broken.NanReward(), rebuild=False)
    assert any("reward nan is not finite" in f for f in found), found


def test_fingerprint_depends_on_images_and_seed():
    env = ColorsEnv()
    assert episode_fingerprint(env, 1) == episode_fingerprint(env, 1)
    assert len({episode_fingerprint(env, seed) for seed in range(6)}) > 1
