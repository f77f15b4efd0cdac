"""``vlm-envs make-dataset``: the rows slime, verl and TRL read, and the curricula that level them.

:func:`~vlm_envs.datasets.build.make_dataset` writes one trainer's files
(:mod:`~vlm_envs.datasets.build` slime's, :mod:`~vlm_envs.datasets.verl` verl's,
:mod:`~vlm_envs.datasets.trl` TRL's), here or on Ray tasks (:mod:`~vlm_envs.datasets.on_ray`);
:mod:`~vlm_envs.datasets.curriculum` gives each row its level.
"""

from vlm_envs.datasets.build import OutputExistsError, RowBuildError, make_dataset
from vlm_envs.datasets.curriculum import LevelPlan, curriculum_plan, parse_curriculum

__all__ = [
    "LevelPlan",
    "OutputExistsError",
    "RowBuildError",
    "curriculum_plan",
    "make_dataset",
    "parse_curriculum",
]
