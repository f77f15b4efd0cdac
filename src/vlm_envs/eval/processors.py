"""Load the served model's processor for ``sglang:URL`` without waiting minutes on an absent hub.

A local folder loads as is. A hub name is tried in the local Hugging Face cache first; only when it
is not there, offline mode is off and one short request shows the hub answers is it downloaded.
Without that check ``huggingface_hub`` retries each file with backoff (about 50 s per name here, over
3 minutes through a processor's several files) before it gives up.
"""

from __future__ import annotations

import http.client
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from vlm_envs.eval.policies import PolicyError

#: Seconds the hub has to answer one request before a name that is not cached is given up on.
HUB_PROBE_TIMEOUT_S = 5.0
_HINT = "pass --tokenizer /path/to/folder (a local folder with the served model's tokenizer files)"


def _load(name: str, **kwargs: Any) -> Any:
    """``AutoProcessor``, or ``AutoTokenizer`` where no processor loads; :class:`PolicyError` if neither."""
    from transformers import AutoProcessor, AutoTokenizer

    try:
        return AutoProcessor.from_pretrained(name, **kwargs)
    except Exception as processor_error:  # a VLM processor can fail in many ways (e.g. no torchvision)
        try:
            return AutoTokenizer.from_pretrained(name, **kwargs)
        except Exception as err:
            raise PolicyError(
                f"cannot load a processor or tokenizer from {name!r}: {type(processor_error).__name__}: "
                f"{processor_error}; {type(err).__name__}: {err}"
            ) from err


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
        raise PolicyError(f"tokenizer folder {name!r} does not exist; {_HINT}")
    try:
        return _load(name, local_files_only=True)
    except PolicyError as cached_error:
        why = _hub_unreachable(name)
        if why is not None:
            raise PolicyError(
                f"cannot load tokenizer {name!r}: it is not a local folder nor in the Hugging Face cache, "
                f"and {why}; {_HINT}"
            ) from cached_error
    return _load(name)
