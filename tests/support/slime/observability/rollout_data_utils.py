"""Stand-in for ``slime.observability.rollout_data_utils``: ``validate_rollout_id_annotated``, the check
slime's ``RolloutManager`` runs on a rollout's nested output before flattening it (slime/ray/rollout.py)."""

from __future__ import annotations

from typing import Any

from slime.utils.types import Sample


def validate_rollout_id_annotated(node: Any, depth: int = 0) -> None:
    """The real one's rule: a list of samples at depth >= 2 (prompt x rollout x the samples one rollout
    returned) with more than one sample must carry one ``rollout_id``, set on every sample."""
    if isinstance(node, Sample):
        return
    assert isinstance(node, list), f"unexpected rollout output node type: {type(node).__name__}"
    if node and isinstance(node[0], Sample):
        if depth >= 2 and len(node) > 1:
            ids = [sample.rollout_id for sample in node]
            missing = [i for i, rollout_id in enumerate(ids) if rollout_id is None]
            assert not missing, f"rollout_id is unset on positions {missing}"
            assert len(set(ids)) == 1, f"sibling samples from one rollout must share rollout_id; got {ids}"
        return
    for item in node:
        validate_rollout_id_annotated(item, depth + 1)
