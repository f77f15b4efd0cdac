"""Demonstrations for a supervised warm start: oracle play or an eval run's winning episodes, as SFT
data in the exact chat rendering the RL rollout uses (``vlm-envs make-sft``).

Needs the ``rollout`` and ``data`` extras.
"""

from vlm_envs.sft.build import SftFiles, make_sft
from vlm_envs.sft.demos import Demonstration, DemonstrationError, play_oracle, replay_record
from vlm_envs.sft.formats import FORMATS, FormatError
from vlm_envs.sft.samples import Conversation, conversations
from vlm_envs.sft.sources import OracleSource, RunSource, SftError

__all__ = [
    "FORMATS",
    "Conversation",
    "Demonstration",
    "DemonstrationError",
    "FormatError",
    "OracleSource",
    "RunSource",
    "SftError",
    "SftFiles",
    "conversations",
    "make_sft",
    "play_oracle",
    "replay_record",
]
