"""``VlmEnvsGRPOTrainer``: TRL's ``GRPOTrainer`` that plays our envs and trains on every image.

On the ``rollout_func`` path TRL drops what the rollout saw: it sets ``images = None`` and re-renders
the dataset prompt for its forward passes, so an episode with an image after its first turn fails
in the loss (``Image features and image tokens do not match``), or trains on misaligned images.
This trainer takes each entry's images from the rollout (:class:`TakesEpisodeImages`), keeps them
with the entry through TRL's shuffling and splitting (one list item per entry in the batch dict),
and hands them to every forward pass TRL makes (old, reference and current log probs), checking
first that each row's tokens are the episode's. It relies on a few internals of TRL, listed in
:func:`trl_problems` and checked at construction: a TRL that changed them is refused by name.
"""

from __future__ import annotations

import collections
import inspect
import logging
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import trl
from trl import GRPOTrainer

from vlm_envs.rollout.trajectory import Status
from vlm_envs.rollout.trl.rewards import episode_reward
from vlm_envs.rollout.trl.rollout import EpisodeRow, VlmEnvsRollout, ids_digest, prompt_problem, rollout_func

#: TRL versions this trainer was tested with (``make test`` runs it against each).
TESTED_TRL_VERSIONS = ("1.16.0",)
#: Where each entry's :class:`EpisodeRow` rides in TRL's batch dict (a list, shuffled and split with it).
ROWS_KEY = "vlm_envs_rows"
#: The vision fields TRL derives from the dataset prompt; replaced by the episodes' own.
TRL_VISION_KEYS = (
    "pixel_values",
    "image_grid_thw",
    "num_images",
    "pixel_attention_mask",
    "spatial_shapes",
    "num_tiles",
    "image_sizes",
    "token_type_ids",
    "mm_token_type_ids",
    "image_position_ids",
)
#: What this trainer relies on: GRPOTrainer's methods and the parameters it passes or reads.
RELIED_ON = {
    "__init__": ("model", "reward_funcs", "args", "train_dataset", "processing_class", "rollout_func"),
    "_generate_and_score_completions": ("inputs",),
    "_compute_loss": ("model", "inputs"),
    "_get_per_token_logps_and_entropies": (
        "model",
        "input_ids",
        "attention_mask",
        "logits_to_keep",
        "batch_size",
        "compute_entropy",
        "compute_aux_loss",
        "pixel_values",
        "image_grid_thw",
        "num_images",
        "mm_token_type_ids",
    ),
}
#: Attributes of a built GRPOTrainer the rollout reads (beside ``args`` and ``processing_class``).
RELIED_ON_ATTRIBUTES = ("use_vllm", "model_wrapped", "accelerator", "_dist")


#: Where TRL's GRPOTrainer logs (its "All reward functions returned None" warning).
TRL_LOGGER = "trl.trainer.grpo_trainer"


class TrlVersionError(RuntimeError):
    """The installed TRL changed what :class:`VlmEnvsGRPOTrainer` relies on."""


class DatasetError(ValueError):
    """A dataset row names no episode this trainer can play."""


class EpisodesFailedError(RuntimeError):
    """Every episode failed in ``max_failed_steps`` generation rounds in a row: training stopped."""


def dataset_prompts(dataset: Any) -> Iterator[Any]:
    """Each row's ``prompt`` (``KeyError`` for a row without one), reading no other column."""
    if hasattr(dataset, "select_columns") and "prompt" in (getattr(dataset, "column_names", None) or ()):
        dataset = dataset.select_columns(["prompt"])
    for row in dataset:
        yield row["prompt"]


def check_dataset(dataset: Any, name: str) -> None:
    """Raise :class:`DatasetError` with the index and reason of ``dataset``'s first row whose episode
    cannot play. A streamed dataset (no ``len``) is read when sampled: its bad rows fail there."""
    if dataset is None or not hasattr(dataset, "__len__"):
        return
    if isinstance(dataset, dict):  # TRL's named eval datasets
        for key, part in dataset.items():
            check_dataset(part, f"{name}[{key!r}]")
        return
    index = -1
    try:
        for index, prompt in enumerate(dataset_prompts(dataset)):
            problem = prompt_problem(prompt)
            if problem is not None:
                raise DatasetError(f"{name} row {index}: {problem}")
    except (KeyError, TypeError) as err:
        raise DatasetError(
            f"{name} row {index + 1} has no 'prompt' column ({type(err).__name__}: {err})"
        ) from None


class FailedEpisodeWarnings(logging.Filter):
    """Drops TRL's "All reward functions returned None" warning about an episode of ours that failed
    or was aborted: the rollout logs the real cause (and TRL gives that episode no advantage)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        ours = (
            f"'status': '{Status.FAILED.value}'" in message
            or f"'status': '{Status.ABORTED.value}'" in message
        )
        return not ("All reward functions returned None" in message and ours)


def trl_problems(trainer_class: type = GRPOTrainer) -> list[str]:
    """What ``trainer_class`` lacks of :data:`RELIED_ON` (empty when it has all of it)."""
    problems = []
    for name, params in RELIED_ON.items():
        method = getattr(trainer_class, name, None)
        if not callable(method):
            problems.append(f"GRPOTrainer.{name} is gone")
            continue
        have = inspect.signature(method).parameters
        missing = [p for p in params if p not in have]
        if missing:
            problems.append(f"GRPOTrainer.{name} no longer takes {', '.join(missing)}")
    return problems


def check_trl(version: str = trl.__version__, trainer_class: type = GRPOTrainer) -> None:
    """Raise :class:`TrlVersionError` if TRL ``version`` changed what the trainer relies on; warn if
    it is merely untested."""
    problems = trl_problems(trainer_class)
    if problems:
        raise TrlVersionError(
            f"VlmEnvsGRPOTrainer was tested with TRL {', '.join(TESTED_TRL_VERSIONS)}; TRL {version} "
            f"changed what it relies on: {'; '.join(problems)}. Install a tested TRL "
            f"(pip install 'vlm-envs[trl]')"
        )
    if version not in TESTED_TRL_VERSIONS:
        warnings.warn(
            f"VlmEnvsGRPOTrainer was tested with TRL {', '.join(TESTED_TRL_VERSIONS)}, not {version}",
            stacklevel=3,
        )


class VlmEnvsGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` with this library's rollout and reward functions as defaults.

    Takes GRPOTrainer's own arguments. ``rollout_func`` defaults to
    :data:`~vlm_envs.rollout.trl.rollout.rollout_func` (rows written by
    ``vlm-envs make-dataset ENV --trainer trl``), ``reward_funcs`` to
    :func:`~vlm_envs.rollout.trl.rewards.episode_reward`. Every image of each episode reaches
    every forward pass. ``tools`` and ``environment_factory`` are TRL's other multi-turn route and
    are refused here; vLLM is supported in server mode (``trl vllm-serve``).

    With this library's rollout, every row of ``train_dataset`` and ``eval_dataset`` is checked when
    the trainer is built (:class:`DatasetError`: the first bad row's index and reason). During
    training, a generation round whose every episode FAILED stops it with
    :class:`EpisodesFailedError`, naming the episodes' reasons, as an error in stock TRL's generation
    would; ``max_failed_steps`` (default 1) such rounds in a row are needed to stop it.
    """

    def __init__(self, *args: Any, max_failed_steps: int = 1, **kwargs: Any) -> None:
        check_trl()
        if not (isinstance(max_failed_steps, int) and max_failed_steps >= 1):
            raise ValueError(f"max_failed_steps must be an int >= 1, got {max_failed_steps!r}")
        bound = inspect.signature(GRPOTrainer.__init__).bind(self, *args, **kwargs)
        arguments = {k: v for k, v in bound.arguments.items() if k != "self"}
        if arguments.get("tools") or arguments.get("environment_factory"):
            raise ValueError(
                "VlmEnvsGRPOTrainer plays vlm-envs episodes through its rollout function; tools and "
                "environment_factory are TRL's other route: pass neither"
            )
        config = arguments.get("args")
        if config is not None and config.use_vllm and config.vllm_mode != "server":
            raise ValueError(
                f"vllm_mode={config.vllm_mode!r}: the vlm-envs rollout talks to a vLLM server "
                "(`trl vllm-serve`, vllm_mode='server'), or generates with the trainer's model "
                "(use_vllm=False)"
            )
        if arguments.get("reward_funcs") is None:
            arguments["reward_funcs"] = [episode_reward]
        if arguments.get("rollout_func") is None:
            arguments["rollout_func"] = rollout_func
        if isinstance(arguments["rollout_func"], VlmEnvsRollout):
            for name in ("train_dataset", "eval_dataset"):
                check_dataset(arguments.get(name), name)
        self.max_failed_steps = max_failed_steps
        self._failed_steps = 0
        self._vlm_envs_rows: list[EpisodeRow] | None = None
        with warnings.catch_warnings():  # the experimental API is pinned by check_trl and the tests
            warnings.filterwarnings("ignore", message="You are using 'rollout_func'")
            super().__init__(**arguments)
        missing = [name for name in RELIED_ON_ATTRIBUTES if not hasattr(self, name)]
        if missing:
            raise TrlVersionError(f"TRL {trl.__version__}'s GRPOTrainer has no {', '.join(missing)}")
        self._image_token_id = rollout_func.codec(self.processing_class).image_token_id

    def take_episode_images(self, rows: Sequence[EpisodeRow]) -> None:
        """Called by the rollout with each entry's episode, in the order of TRL's batch."""
        self._vlm_envs_rows = list(rows)

    def count_failures(self, rows: Sequence[EpisodeRow]) -> None:
        """Count a generation round whose every episode FAILED; raise :class:`EpisodesFailedError`
        at ``max_failed_steps`` such rounds in a row."""
        errors = [
            " ".join(str(row.record.get("error")).split())  # one line
            for row in rows
            if row.record.get("status") == Status.FAILED.value
        ]
        self._failed_steps = self._failed_steps + 1 if rows and len(errors) == len(rows) else 0
        if self._failed_steps >= self.max_failed_steps:
            reasons = "; ".join(f"{n}x {error}" for error, n in collections.Counter(errors).most_common(3))
            raise EpisodesFailedError(
                f"every episode FAILED in {self._failed_steps} generation round(s) in a row "
                f"(VlmEnvsGRPOTrainer(max_failed_steps={self.max_failed_steps})); training stopped. "
                f"Reasons in the last round ({len(rows)} episodes): {reasons}"
            )

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        self._vlm_envs_rows = None
        quiet = FailedEpisodeWarnings()
        logging.getLogger(TRL_LOGGER).addFilter(quiet)
        try:
            output = super()._generate_and_score_completions(inputs)
            rows = self._vlm_envs_rows
        finally:
            self._vlm_envs_rows = None
            logging.getLogger(TRL_LOGGER).removeFilter(quiet)
        if rows is None:  # a rollout function of the user's own: TRL's behaviour, untouched
            return output
        self.count_failures(rows)
        for key in TRL_VISION_KEYS:
            output.pop(key, None)
        output[ROWS_KEY] = rows
        return output

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        self._vlm_envs_rows = inputs.get(ROWS_KEY)
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._vlm_envs_rows = None

    def _get_per_token_logps_and_entropies(
        self,
        model: Any,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        logits_to_keep: int,
        batch_size: int | None = None,
        compute_entropy: bool = False,
        compute_aux_loss: bool = False,
        **trl_vision: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        rows = self._vlm_envs_rows
        if rows is None:  # not an episode batch of ours
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size,
                compute_entropy, compute_aux_loss, **trl_vision,
            )  # fmt: skip
        if len(rows) != input_ids.size(0):
            raise RuntimeError(f"{input_ids.size(0)} rows in TRL's batch, {len(rows)} episodes")
        size = batch_size or input_ids.size(0)
        logps, entropies, aux = [], [], []
        for start in range(0, input_ids.size(0), size):
            part = slice(start, start + size)
            ids, mask = input_ids[part], attention_mask[part]
            check_rows(rows[part], ids, mask, logits_to_keep)
            chunk = super()._get_per_token_logps_and_entropies(
                model, ids, mask, logits_to_keep, None, compute_entropy, compute_aux_loss,
                **vision_inputs(rows[part], ids, self._image_token_id),
            )  # fmt: skip
            logps.append(chunk[0])
            entropies.append(chunk[1])
            aux.append(chunk[2])
        return (
            torch.cat(logps, dim=0),
            torch.cat(entropies, dim=0) if compute_entropy else None,
            torch.stack(aux).mean() if compute_aux_loss else None,
        )


def check_rows(
    rows: Sequence[EpisodeRow], input_ids: torch.Tensor, mask: torch.Tensor, completion: int
) -> None:
    """Raise unless each row of ``input_ids`` holds its episode's tokens (prompt, then completion)."""
    prompt_ids, prompt_mask = input_ids[:, :-completion], mask[:, :-completion]
    for i, row in enumerate(rows):
        prompt = prompt_ids[i][prompt_mask[i].bool()].tolist()
        tail = input_ids[i, -completion:][: len(row.completion_ids)].tolist()
        if ids_digest(prompt, tail) != row.digest:
            raise RuntimeError(
                f"row {i} of TRL {trl.__version__}'s batch does not hold the tokens of the episode whose "
                "images it would get; refusing to train on misaligned images"
            )


def vision_inputs(
    rows: Sequence[EpisodeRow], input_ids: torch.Tensor, image_token_id: int | None
) -> dict[str, Any]:
    """The forward pass's vision fields for ``rows`` (none when they hold no image)."""
    with_images = [row.vision for row in rows if row.num_images]
    if not with_images:
        return {}
    device = input_ids.device
    return {
        "pixel_values": torch.cat([v["pixel_values"] for v in with_images]).to(device),
        "image_grid_thw": torch.cat([v["image_grid_thw"] for v in with_images]).to(device),
        "num_images": [row.num_images for row in rows],
        "mm_token_type_ids": (input_ids == image_token_id).long(),
    }
