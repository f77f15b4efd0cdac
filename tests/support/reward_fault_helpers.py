"""What every trainer's reward-fault tests share: the reply each episode plays and the reason each
fault's episode must give (its record's ``error``, after ``reward: ``)."""

from __future__ import annotations

REPLY = "<answer>Up</answer>"
REASONS = {
    "inf": "the episode reward is inf, not a finite number",
    "nan": "the episode reward is nan, not a finite number",
    "huge": "the episode reward is 1e+308, beyond the accepted magnitude 1e+06",
    "none": "the episode reward is None, not a number",
    "text": "the episode reward is str '1.0', not a number",
    "raises": "the episode reward raised RuntimeError: the reward model is down",
    "step_nan": "the step reward of turn 0 is nan, not a finite number",
    "step_inf": "the step reward of turn 0 is -inf, not a finite number",
}
