"""The clock env's oracle rationale: where the hour and minute hands point, the time they show, and for a
``later`` question the time that many minutes on."""

from __future__ import annotations

from vlm_envs.envs.clock.times import spoken


def explain(shown: int, later: int | None) -> str:
    """Reading the dial that shows ``shown`` (minutes past 12:00), then adding ``later`` minutes if asked."""
    hour, minute = divmod(shown, 60)
    hour = hour or 12
    if minute:
        text = (
            f"The hour hand is between {hour} and {hour % 12 + 1} and the minute hand is on {minute} minutes"
        )
    else:
        text = f"The hour hand is on {hour} and the minute hand is on the 12"
    text += f", so the clock shows {spoken(shown)}."
    if later is not None:
        text += f" {later} minutes later it is {spoken(shown + later)}."
    return text
