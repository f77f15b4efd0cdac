"""Chat-template and processor encoding for multi-turn rollouts.

:class:`ChatCodec` turns the prompt messages into token ids (images expanded to their pad tokens)
plus the tensors a trainer needs, and each later observation into the exact token delta the chat
template appends after a finished assistant turn, ending with the generation prompt. The delta is
cut from a short fixed reference conversation, so its cost does not grow with the episode.

It works with a Qwen-VL-family processor (an ``image_processor`` with ``patch_size``,
``merge_size`` and min/max pixels, giving ``pixel_values`` and ``image_grid_thw``) or with a plain
tokenizer for text-only conversations. Messages are chat messages whose content is a string or a
list of parts ``{"type": "text", "text": ...}`` / ``{"type": "image", "image": PIL.Image}``, as
``Env.format_observation`` gives them. Images go through
:class:`~vlm_envs.rollout.images.VisionPreprocessor` (resized to the processor's grid, cached by content).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from PIL import Image

from vlm_envs.rollout.chat_messages import (
    MARKER,
    collect_images,
    inert,
    message_key,
    structural_pattern,
    template_message,
)
from vlm_envs.rollout.contract import TokenSpace
from vlm_envs.rollout.images import (
    CodecError,
    ProcessedImage,
    VisionPreprocessor,
    image_digest,
    stack_pixel_values,
    train_inputs_of,
)

# Qwen-VL special token names (Qwen2-VL / Qwen2.5-VL / Qwen3-VL tokenizers).
IMAGE_TOKEN = "<|image_pad|>"
VIDEO_TOKEN = "<|video_pad|>"
VISION_START_TOKEN = "<|vision_start|>"
VISION_END_TOKEN = "<|vision_end|>"
VISION_PAD_TOKEN = "<|vision_pad|>"

# Content of the reference conversation the observation deltas are cut from.
_REF_SYSTEM = "S"
_REF_USER = "U"
_REF_ASSISTANT = f"{MARKER}ASSISTANT-TURN\u2063"
#: Observation deltas kept by content (Sokoban and other envs revisit the same observations).
DELTA_CACHE_ENTRIES = 4096
# Stands for the k-th assistant content in render_conversation (cannot occur in a template's own text).
_SPLICE = MARKER + "SPLICE-{}\u2063"


@dataclasses.dataclass(frozen=True)
class Encoded:
    """Token ids for one piece of a conversation and the images it brings, in placeholder order.

    ``ids`` are the training ids (each image expanded to ``num_tokens`` pad tokens); ``engine_ids``
    are the same with one unexpanded pad token per image, for engines that expand images themselves.
    Ids are tuples: immutable, so cached encodings are shared safely, and out of the garbage
    collector's way (a tuple of ints is untracked; a list of ints costs every full collection a
    cache miss per element).
    """

    ids: tuple[int, ...]
    engine_ids: tuple[int, ...]
    images: list[ProcessedImage]
    text: str

    @property
    def pil_images(self) -> list[Image.Image]:
        """The resized images, as an engine should receive them."""
        return [p.image for p in self.images]

    @property
    def pixel_values(self) -> torch.Tensor | None:
        """Processor pixel rows of all images, concatenated in order (``None`` without images)."""
        return stack_pixel_values(self.images) if self.images else None

    @property
    def image_grid_thw(self) -> torch.Tensor | None:
        """One ``(t, h, w)`` patch-grid row per image (``None`` without images)."""
        return torch.tensor([p.grid_thw for p in self.images], dtype=torch.long) if self.images else None

    def train_inputs(self) -> dict[str, torch.Tensor]:
        """``{"pixel_values", "image_grid_thw"}`` for the trainer, or ``{}`` without images."""
        return train_inputs_of(self.images)


class ChatCodec:
    """Encodes prompts and observation deltas with a chat template, token-exactly.

    ``processor_or_tokenizer`` is a Qwen-VL-family processor (images allowed) or a tokenizer with a
    chat template (text only). ``chat_template`` overrides the one it carries. Processed images are
    cached by content, up to ``cache_bytes`` of pixel values.
    """

    def __init__(
        self, processor_or_tokenizer: Any, *, chat_template: str | None = None, cache_bytes: int = 256 << 20
    ) -> None:
        obj = processor_or_tokenizer
        self.processor = obj if hasattr(obj, "image_processor") else None
        self.tokenizer = obj.tokenizer if self.processor is not None else obj
        self.chat_template = (
            chat_template or getattr(obj, "chat_template", None) or self.tokenizer.chat_template
        )
        if not self.chat_template:
            raise CodecError("the processor/tokenizer has no chat template: pass chat_template=")
        self._backend = getattr(self.tokenizer, "backend_tokenizer", None)
        self._structural = structural_pattern(self.tokenizer)
        self._deltas: OrderedDict[tuple, Encoded] = OrderedDict()
        self._deltas_lock = threading.Lock()

        vocab = self.tokenizer.get_vocab()
        image_token = getattr(self.processor, "image_token", IMAGE_TOKEN)
        video_token = getattr(self.processor, "video_token", VIDEO_TOKEN)
        self.image_token_id: int | None = vocab.get(image_token)
        self.video_token_id: int | None = vocab.get(video_token)
        names = (image_token, video_token, VISION_START_TOKEN, VISION_END_TOKEN, VISION_PAD_TOKEN)
        #: Ids that may only appear where the codec puts them; a generated one must end the episode.
        self.special_image_ids: frozenset[int] = frozenset(vocab[n] for n in names if n in vocab)

        #: Image resizing, processing and caching; ``None`` for a plain tokenizer.
        self.vision = None if self.processor is None else VisionPreprocessor(obj.image_processor, cache_bytes)
        if self.vision is not None and self.image_token_id is None:
            raise CodecError(f"the tokenizer has no image token {image_token!r}")
        self.end_of_turn_id = self._find_end_of_turn()
        eos = self.tokenizer.eos_token_id
        #: Token ids that end a generated turn: the template's end-of-turn token, then the tokenizer's eos.
        self.stop_token_ids: list[int] = [self.end_of_turn_id] + (
            [eos] if eos is not None and eos != self.end_of_turn_id else []
        )

    @functools.cached_property
    def token_space(self) -> TokenSpace:
        """What the Sample contract checks ids and image blocks against."""
        return TokenSpace.of(self)

    # ---- images -----------------------------------------------------------------------------------

    def target_size(self, width: int, height: int) -> tuple[int, int]:
        """``(width, height)`` the processor resizes an image of this size to."""
        return self._require_vision().target_size(width, height)

    def process_image(self, image: Image.Image) -> ProcessedImage:
        """Resize ``image`` the way the processor will and run it; cached by image content."""
        return self._require_vision().process(image)

    def _require_vision(self) -> VisionPreprocessor:
        if self.vision is None:
            raise CodecError("this codec wraps a plain tokenizer: images need a processor")
        return self.vision

    # ---- text -------------------------------------------------------------------------------------

    def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text`` (special tokens recognised, none added)."""
        if self._backend is not None:
            return self._backend.encode(text, add_special_tokens=False).ids
        return self.tokenizer.encode(text, add_special_tokens=False)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Text of ``ids``."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def render(self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = False) -> str:
        """The chat template's text for ``messages`` (image parts need no image object here)."""
        return self.tokenizer.apply_chat_template(
            [template_message(m, self.as_text, vision=self.processor is not None) for m in messages],
            chat_template=self.chat_template,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
        )

    def as_text(self, text: str) -> str:
        """``text`` with every special-token string broken by a zero-width non-joiner, so that
        message text (an env quoting a model, say) never tokenizes into chat or image structure."""
        return inert(self._structural, text)

    # ---- encoding ---------------------------------------------------------------------------------

    def encode_prompt(
        self, messages: Sequence[Mapping[str, Any]], images: Sequence[Image.Image] | None = None
    ) -> Encoded:
        """The prompt: ``messages`` rendered with the generation prompt, images expanded.

        ``images`` are the images of the image parts in order; without it they are taken from the
        parts' ``"image"`` values.
        """
        text = self.render(messages, add_generation_prompt=True)
        return self._encode_text(text, collect_images(messages, images))

    def encode_rendered(self, text: str, images: Sequence[Image.Image] = ()) -> Encoded:
        """A prompt already rendered with the chat template, encoded by one processor call on
        ``text`` and ``images`` (how slime encodes a dataset prompt): the ids, ``pixel_values`` and
        grids are the processor's own, the images are not resized first. Without images the text
        is tokenized as it stands."""
        if not images:
            ids = tuple(self.tokenize(text))
            return Encoded(ids=self._expand(ids, []), engine_ids=ids, images=[], text=text)
        vision = self._require_vision()
        rgb = [im if im.mode == "RGB" else im.convert("RGB") for im in images]
        out = self.processor(text=[text], images=rgb, return_tensors="pt")
        ids = tuple(int(t) for t in out["input_ids"][0].tolist())
        grids = [tuple(int(x) for x in g) for g in out["image_grid_thw"].tolist()]
        if len(grids) != len(rgb):
            raise CodecError(f"the processor gave {len(grids)} image grids for {len(rgb)} images")
        processed, start = [], 0
        for image, grid in zip(rgb, grids, strict=True):
            rows = math.prod(grid)
            pixels = out["pixel_values"][start : start + rows]
            num_tokens = rows // vision.merge_size**2
            processed.append(
                ProcessedImage(image, grid, num_tokens, image_digest(image), pixel_values=pixels)
            )
            start += rows
        pad = self.image_token_id
        engine_ids = tuple(t for i, t in enumerate(ids) if t != pad or i == 0 or ids[i - 1] != pad)
        if self._expand(engine_ids, processed) != ids:
            raise CodecError("the processor's image blocks do not match its image grids")
        return Encoded(ids=ids, engine_ids=engine_ids, images=processed, text=text)

    def encode_observation(
        self, message: Mapping[str, Any], images: Sequence[Image.Image] | None = None, *, ended_with_eos: bool
    ) -> Encoded:
        """The tokens the template appends after a finished assistant turn for ``message``.

        They run from the end of the assistant's content through ``message`` to the generation
        prompt. ``ended_with_eos`` says whether the generated ids already end with the end-of-turn
        token; if not (stop string, length) the delta starts with it.
        """
        return self._delta(message, images, "eos" if ended_with_eos else "open")

    def encode_followup(
        self, message: Mapping[str, Any], images: Sequence[Image.Image] | None = None
    ) -> Encoded:
        """The tokens the template appends for ``message`` right after a user turn (no assistant
        turn between), through the generation prompt: the task's :meth:`head` + this is a context
        that shows the task and then the current observation."""
        return self._delta(message, images, "user")

    def head(self, prompt: Encoded) -> Encoded:
        """``prompt`` (ending with the generation prompt) without its generation prompt."""
        tail = self._generation_prompt_ids
        if not tail or prompt.ids[-len(tail) :] != tail or prompt.engine_ids[-len(tail) :] != tail:
            raise CodecError("the prompt does not end with the template's generation prompt")
        return dataclasses.replace(
            prompt, ids=prompt.ids[: -len(tail)], engine_ids=prompt.engine_ids[: -len(tail)]
        )

    @functools.cached_property
    def _generation_prompt_ids(self) -> tuple[int, ...]:
        ref = [{"role": "system", "content": _REF_SYSTEM}, {"role": "user", "content": _REF_USER}]
        closed, open_ = self.render(ref), self.render(ref, add_generation_prompt=True)
        if not open_.startswith(closed):
            raise CodecError("the template's generation prompt does not follow the conversation it closes")
        return tuple(self.tokenize(open_[len(closed) :]))

    def _delta(self, message: Mapping[str, Any], images: Sequence[Image.Image] | None, after: str) -> Encoded:
        """A cached delta: ``after`` is ``"eos"``/``"open"`` (an assistant turn that did / did not
        end with its end-of-turn token) or ``"user"`` (a user turn)."""
        processed = [self.process_image(im) for im in collect_images([message], images)]
        key = (message_key(message, processed), after)
        with self._deltas_lock:
            cached = self._deltas.get(key)
            if cached is not None:
                self._deltas.move_to_end(key)
        if cached is None:
            if after == "user":
                cached = self._encode_followup(message, processed)
            else:
                cached = self._encode_delta(message, processed, ended_with_eos=after == "eos")
            with self._deltas_lock:
                self._deltas[key] = cached
                while len(self._deltas) > DELTA_CACHE_ENTRIES:
                    self._deltas.popitem(last=False)
        return cached

    def _encode_followup(self, message: Mapping[str, Any], processed: list[ProcessedImage]) -> Encoded:
        ref = [{"role": "system", "content": _REF_SYSTEM}, {"role": "user", "content": _REF_USER}]
        closed, text = self.render(ref), self.render([*ref, message], add_generation_prompt=True)
        if not text.startswith(closed):
            raise CodecError("the template renders a user turn differently when another message follows")
        delta = text[len(closed) :]
        ids = tuple(self.tokenize(delta))
        return Encoded(ids=self._expand(ids, processed), engine_ids=ids, images=processed, text=delta)

    def _encode_delta(
        self, message: Mapping[str, Any], processed: list[ProcessedImage], ended_with_eos: bool
    ) -> Encoded:
        ref = [
            {"role": "system", "content": _REF_SYSTEM},
            {"role": "user", "content": _REF_USER},
            {"role": "assistant", "content": _REF_ASSISTANT},
            message,
        ]
        text = self.render(ref, add_generation_prompt=True)
        delta = text[text.index(_REF_ASSISTANT) + len(_REF_ASSISTANT) :]
        ids = tuple(self.tokenize(delta))
        encoded = Encoded(ids=self._expand(ids, processed), engine_ids=ids, images=processed, text=delta)
        if encoded.ids[:1] != (self.end_of_turn_id,):
            raise CodecError("the template does not close the assistant turn with its end-of-turn token")
        if not ended_with_eos:
            return encoded
        return dataclasses.replace(
            encoded,
            ids=encoded.ids[1:],
            engine_ids=encoded.engine_ids[1:],
            text=delta[len(self.tokenizer.convert_ids_to_tokens(self.end_of_turn_id)) :],
        )

    def render_conversation(
        self,
        messages: Sequence[Mapping[str, Any]],
        images: Sequence[Image.Image] | None = None,
        assistant_token_ids: Sequence[Sequence[int]] | None = None,
        add_generation_prompt: bool = False,
    ) -> list[int]:
        """The whole conversation through the chat template, tokenized, images expanded.

        For the sanity check of a finished episode. ``assistant_token_ids[k]``, if given, stands for
        the content of the k-th assistant message (the generated ids without the end-of-turn token),
        so a model's non-canonical tokenization does not count as a difference.
        """
        all_images = collect_images(messages, images)
        if assistant_token_ids is None:
            text = self.render(messages, add_generation_prompt)
            return list(self._encode_text(text, all_images).ids)
        spliced, k = [], 0
        for m in messages:
            if m["role"] == "assistant":
                m = {**m, "content": _SPLICE.format(k)}
                k += 1
            spliced.append(m)
        if k != len(assistant_token_ids):
            raise CodecError(f"{k} assistant messages but {len(assistant_token_ids)} assistant_token_ids")
        text = self.render(spliced, add_generation_prompt)
        ids: list[int] = []
        rest = text
        for i in range(k):
            before, rest = rest.split(_SPLICE.format(i), 1)
            ids += self.tokenize(before)
            ids += list(assistant_token_ids[i])
        ids += self.tokenize(rest)
        return list(self._expand(ids, [self.process_image(im) for im in all_images]))

    def _encode_text(self, text: str, images: list[Image.Image]) -> Encoded:
        ids = tuple(self.tokenize(text))
        processed = [self.process_image(im) for im in images]
        return Encoded(ids=self._expand(ids, processed), engine_ids=ids, images=processed, text=text)

    def _expand(self, ids: Sequence[int], images: list[ProcessedImage]) -> tuple[int, ...]:
        """``ids`` with each image token replaced by its image's pad tokens (counts checked)."""
        positions = [i for i, t in enumerate(ids) if t in self.special_image_ids]
        image_positions = [i for i in positions if ids[i] == self.image_token_id]
        if len(image_positions) != len(images) or len(positions) != 3 * len(images):
            raise CodecError(
                f"the text holds {len(image_positions)} image tokens and {len(positions)} vision special "
                f"tokens for {len(images)} images: text must not contain vision special tokens itself"
            )
        if not images:
            return tuple(ids)
        out: list[int] = []
        start = 0
        for pos, image in zip(image_positions, images, strict=True):
            out += ids[start:pos]
            out += [ids[pos]] * image.num_tokens
            start = pos + 1
        out += ids[start:]
        return tuple(out)

    def _find_end_of_turn(self) -> int:
        """The token the template closes an assistant turn with (``<|im_end|>`` for Qwen)."""
        ref = [
            {"role": "system", "content": _REF_SYSTEM},
            {"role": "user", "content": _REF_USER},
            {"role": "assistant", "content": _REF_ASSISTANT},
            {"role": "user", "content": _REF_USER},
        ]
        text = self.render(ref)
        tail = text[text.index(_REF_ASSISTANT) + len(_REF_ASSISTANT) :]
        ids = self.tokenize(tail)
        added = {t.content for t in self.tokenizer.added_tokens_decoder.values()}
        first = self.tokenizer.convert_ids_to_tokens(ids[0]) if ids else None
        if first not in added or not tail.startswith(first):
            raise CodecError(
                f"the template closes an assistant turn with {tail[:20]!r}, not with a single added token"
            )
        return ids[0]
