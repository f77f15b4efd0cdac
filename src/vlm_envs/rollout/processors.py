"""Load the served model's processor for ``sglang:URL`` without waiting minutes on an absent hub.

A local folder loads as is. A hub name is tried in the local Hugging Face cache first; only when it
is not there, offline mode is off and one short request shows the hub answers is it downloaded.
Without that check ``huggingface_hub`` retries each file with backoff (about 50 s per name here, over
3 minutes through a processor's several files) before it gives up.

transformers builds a Qwen-VL processor only with its video processor, which needs torchvision (there
is no CPU build of it, FACTS.md). A local folder whose processor does not load that way is assembled
from its image processor (the PIL one) and its tokenizer, with no video processor: images and text
work, videos do not. Such a processor saves to a folder as transformers lays one out (the folder's
video processor config kept), which loads back here, and with ``AutoProcessor`` where torchvision is.
"""

from __future__ import annotations

import http.client
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

#: What a folder holds for each part (transformers' file names). Since transformers 5,
#: ``save_pretrained`` nests the image and video processor configs in the processor file; older
#: folders (and the hub's Qwen-VL ones) hold them in files of their own.
IMAGE_PROCESSOR_FILE, PROCESSOR_FILE, TOKENIZER_FILE, VIDEO_PROCESSOR_FILE, CHAT_TEMPLATE_FILE = (
    "preprocessor_config.json",
    "processor_config.json",
    "tokenizer_config.json",
    "video_preprocessor_config.json",
    "chat_template.jinja",
)

#: Seconds the hub has to answer one request before a name that is not cached is given up on.
HUB_PROBE_TIMEOUT_S = 5.0


class ProcessorLoadError(Exception):
    """No processor or tokenizer loads from the name given; the message says what to pass instead."""


_HINT = "pass --tokenizer /path/to/folder (a local folder with the served model's tokenizer files)"


class NoVideoCheck:
    """Mixed into a processor class, lets it be assembled with ``video_processor=None`` and saved.

    ``video_processor_config`` is the config of the video processor left out (from the folder the
    processor was loaded from), written back on save so that the saved folder is whole.
    """

    video_processor_config: dict[str, Any] | None = None

    def check_argument_for_proper_class(self, argument_name: str, argument: Any) -> Any:
        if argument is None and argument_name == "video_processor":
            return None
        return super().check_argument_for_proper_class(argument_name, argument)  # type: ignore[misc]

    def save_pretrained(self, save_directory: str | os.PathLike[str], **kwargs: Any) -> list[str]:
        """Save as transformers does (the tokenizer's files, the chat template, the processor file
        with the image and, where known, video processor configs nested); transformers' own
        ``save_pretrained`` fails on the missing video processor. Returns the processor file."""
        if getattr(self, "video_processor", None) is not None:
            return super().save_pretrained(save_directory, **kwargs)  # type: ignore[misc]
        if kwargs.get("push_to_hub"):
            raise ValueError(
                "a processor without its video processor saves to a folder only: upload the folder"
            )
        folder = Path(save_directory)
        folder.mkdir(parents=True, exist_ok=True)
        self.tokenizer.save_pretrained(folder)  # type: ignore[attr-defined]
        template = self.chat_template  # type: ignore[attr-defined]
        if isinstance(template, str):  # after the tokenizer's: the processor's template is the one used
            (folder / CHAT_TEMPLATE_FILE).write_text(template, encoding="utf-8")
        config = {k: v for k, v in self.to_dict().items() if k != "video_processor"}  # type: ignore[attr-defined]
        config["processor_class"] = _transformers_class(type(self)).__name__
        if self.video_processor_config:
            config["video_processor"] = self.video_processor_config
        path = folder / PROCESSOR_FILE
        path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return [str(path)]


def _transformers_class(cls: type) -> type:
    """The first class of ``cls``'s MRO that transformers defines (the one its loaders know)."""
    return next(c for c in cls.__mro__ if c.__module__.startswith("transformers."))


def _config(folder: Path, name: str, nested: str | None = None) -> dict[str, Any]:
    """The JSON object in file ``name`` of ``folder`` (its ``nested`` object, if named); ``{}`` if none."""
    try:
        found = json.loads((folder / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if nested is not None and isinstance(found, dict):
        found = found.get(nested)
    return found if isinstance(found, dict) else {}


def _part_config(folder: Path, part: str, own_file: str) -> dict[str, Any]:
    """The config of processor part ``part``: nested in the processor file (transformers 5), else
    in its own file."""
    return _config(folder, PROCESSOR_FILE, nested=part) or _config(folder, own_file)


def _without_video(folder: Path) -> Any | None:
    """The folder's processor from its image processor and tokenizer, no video processor; ``None``
    where the folder names no image processor or processor class, or they do not assemble."""
    import transformers

    image_type = _part_config(folder, "image_processor", IMAGE_PROCESSOR_FILE).get("image_processor_type")
    processor_name = next(
        filter(
            None,
            (
                _config(folder, f).get("processor_class")
                for f in (PROCESSOR_FILE, IMAGE_PROCESSOR_FILE, TOKENIZER_FILE)
            ),
        ),
        None,
    )
    if not isinstance(image_type, str) or not isinstance(processor_name, str):
        return None
    try:  # the PIL image processor where transformers has one (the default one may need torchvision)
        image_class = getattr(transformers, image_type + "Pil", None) or getattr(transformers, image_type)
        processor_class = getattr(transformers, processor_name)
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        assembled = type(processor_class.__name__, (NoVideoCheck, processor_class), {})
        processor = assembled(
            image_processor=image_class.from_pretrained(folder),
            tokenizer=tokenizer,
            video_processor=None,
            chat_template=tokenizer.chat_template,
        )
    except Exception:  # any part missing or of another shape: the caller says what did not load
        return None
    processor.video_processor_config = _part_config(folder, "video_processor", VIDEO_PROCESSOR_FILE) or None
    return processor


def has_image_processor(processor: Any) -> bool:
    """Whether ``processor`` can encode images (a plain tokenizer cannot)."""
    return getattr(processor, "image_processor", None) is not None


def _load(name: str, **kwargs: Any) -> Any:
    """``AutoProcessor``, or ``AutoTokenizer`` where no processor loads; :class:`ProcessorLoadError`
    if neither.

    A local folder that holds an image processor but gives no processor with one is assembled
    without a video processor (see the module doc).
    """
    from transformers import AutoProcessor, AutoTokenizer

    folder = Path(name) if os.path.isdir(name) else None
    try:
        processor = AutoProcessor.from_pretrained(name, **kwargs)
    except Exception as processor_error:  # a VLM processor can fail in many ways (e.g. no torchvision)
        assembled = _without_video(folder) if folder is not None else None
        if assembled is not None:
            return assembled
        try:
            return AutoTokenizer.from_pretrained(name, **kwargs)
        except Exception as err:
            raise ProcessorLoadError(
                f"cannot load a processor or tokenizer from {name!r}: {type(processor_error).__name__}: "
                f"{processor_error}; {type(err).__name__}: {err}"
            ) from err
    if folder is not None and not has_image_processor(processor):  # AutoProcessor fell back to the tokenizer
        return _without_video(folder) or processor
    return processor


def _looks_like_path(name: str) -> bool:
    """A name no hub repo id can have (``org/name`` or ``name``): absolute, relative or nested."""
    return os.path.isabs(name) or name.startswith((".", "~")) or name.count("/") > 1


def _hub_unreachable(name: str) -> str | None:
    """Why the hub cannot serve ``name`` now, or ``None`` if it answers (any HTTP status)."""
    from huggingface_hub import constants

    if constants.is_offline_mode():
        return "HF_HUB_OFFLINE is set"
    url = f"{constants.ENDPOINT}/api/models/{urllib.parse.quote(name, safe='/')}"
    try:
        with urllib.request.urlopen(url, timeout=HUB_PROBE_TIMEOUT_S):
            return None
    except urllib.error.HTTPError:
        return None  # the hub answered (401/404 are for from_pretrained to explain)
    except (OSError, ValueError, http.client.HTTPException) as err:  # URLError, timeouts, refusals, garbage
        reason = getattr(err, "reason", err)
        waited = f"waited {HUB_PROBE_TIMEOUT_S:g} s at most"
        return f"the hub at {constants.ENDPOINT} cannot be reached ({reason}; {waited})"


def load_processor(name: str) -> Any:
    """The processor (or tokenizer) at ``name``: a local folder, or a hub name cached or reachable."""
    if os.path.isdir(os.path.expanduser(name)):
        return _load(os.path.expanduser(name))
    if _looks_like_path(name):
        raise ProcessorLoadError(f"tokenizer folder {name!r} does not exist; {_HINT}")
    try:
        return _load(name, local_files_only=True)
    except ProcessorLoadError as cached_error:
        why = _hub_unreachable(name)
        if why is not None:
            raise ProcessorLoadError(
                f"cannot load tokenizer {name!r}: it is not a local folder nor in the Hugging Face cache, "
                f"and {why}; {_HINT}"
            ) from cached_error
    return _load(name)
