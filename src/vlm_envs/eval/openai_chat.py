"""A client of OpenAI-compatible ``POST {base}/chat/completions`` (vLLM, SGLang, transformers serve, ...).

Env messages become OpenAI messages here: image parts become ``image_url`` parts with PNG data URIs,
a ``tool`` observation becomes a ``tool`` message (answering the previous reply's structured tool
call where there was one), and structured ``tool_calls`` in a reply become the Hermes text form
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` that Qwen-style envs parse.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import random
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp

from vlm_envs.eval.reachable import unreachable
from vlm_envs.http_body import BodyTooLarge, read_capped, redirect_note
from vlm_envs.imaging import png_data_uri

# HTTP statuses worth retrying: request timeout, rate limiting, and every server error.
_RETRY_STATUSES = frozenset({408, 409, 429})
#: The most bytes a reply body may hold: a completion of tens of thousands of tokens with their
#: log probs fits many times over; a server streaming without end does not exhaust memory.
DEFAULT_MAX_BODY_BYTES = 64 << 20


class ChatError(Exception):
    """A chat request failed for good (retries used up, a 4xx answer, or a malformed reply)."""


@dataclasses.dataclass(frozen=True)
class ChatReply:
    """One completion: the text an env should see, the raw assistant message and token usage."""

    text: str
    message: dict[str, Any]
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None


def _content_parts(content: Any) -> list[dict[str, Any]]:
    if content is None or isinstance(content, str):
        return [{"type": "text", "text": content or ""}]
    parts = []
    for part in content:
        if part.get("type") == "image" or "image" in part:
            parts.append({"type": "image_url", "image_url": {"url": png_data_uri(part["image"])}})
        else:
            parts.append({"type": "text", "text": str(part.get("text", ""))})
    return parts


def to_openai_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Env chat messages (``format_observation`` dicts, assistant replies) as OpenAI chat messages.

    An assistant message may carry the server's ``tool_calls``; the ``tool`` message after it
    answers the first of them. A tool observation's images follow it in a ``user`` message (tool
    messages carry text only).
    """
    out: list[dict[str, Any]] = []
    last_call_id: str | None = None
    for index, message in enumerate(messages):
        role = message["role"]
        if role == "assistant":
            item: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
            calls = message.get("tool_calls") or []
            if calls:
                item["tool_calls"] = calls
            last_call_id = calls[0].get("id") if calls else None
            out.append(item)
        elif role == "tool":
            parts = _content_parts(message.get("content"))
            text = "".join(p["text"] for p in parts if p["type"] == "text")
            out.append({"role": "tool", "tool_call_id": last_call_id or f"call_{index}", "content": text})
            images = [p for p in parts if p["type"] == "image_url"]
            if images:
                out.append({"role": "user", "content": images})
            last_call_id = None
        elif role == "system":
            out.append({"role": "system", "content": message.get("content") or ""})
        else:
            out.append({"role": role, "content": _content_parts(message.get("content"))})
    return out


def reply_text(message: Mapping[str, Any]) -> str:
    """The text an env sees for an assistant message (as :func:`parse_reply` checked it): its
    content, then its tool calls in Hermes form."""
    content = message.get("content") or ""
    text = content if isinstance(content, str) else "".join(_part_text(p) for p in content)
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments: Any = function.get("arguments", "{}")
        # broken JSON arguments reach the env as the model wrote them
        with contextlib.suppress(ValueError, RecursionError):
            arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
        body = json.dumps({"name": function.get("name"), "arguments": arguments}, ensure_ascii=False)
        text += f"<tool_call>\n{body}\n</tool_call>"
    return text


def _part_text(part: Mapping[str, Any]) -> str:
    text = part.get("text")
    return text if isinstance(text, str) else ""


def parse_reply(body: Any) -> ChatReply:
    """A :class:`ChatReply` from a decoded ``chat.completion`` object; :class:`ChatError` naming
    what is wrong if its shape is not one (a server's reply is checked like a model's output).
    Token counts that are not counts, and a finish reason that is not a string, become ``None``."""
    choices = body.get("choices") if isinstance(body, Mapping) else None
    if not isinstance(choices, list) or not choices:
        raise _malformed("no 'choices' list with a first choice")
    choice = choices[0]
    if not isinstance(choice, Mapping) or not isinstance(choice.get("message"), Mapping):
        raise _malformed("choices[0] has no 'message' object")
    message = dict(choice["message"])
    content = message.get("content")
    if not (content is None or isinstance(content, str) or _all_objects(content)):
        raise _malformed(f"message.content is {_kind(content)}, not a string or a list of parts")
    calls = message.get("tool_calls")
    if calls is not None and not _all_objects(calls):
        raise _malformed(f"message.tool_calls is {_kind(calls)}, not a list of objects")
    for i, call in enumerate(calls or []):
        if not isinstance(call.get("function") or {}, Mapping):
            raise _malformed(f"message.tool_calls[{i}].function is {_kind(call['function'])}, not an object")
    usage = body.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    finish = choice.get("finish_reason")
    return ChatReply(
        text=reply_text(message),
        message=message,
        finish_reason=finish if isinstance(finish, str) else None,
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
    )


def _malformed(what: str) -> ChatError:
    return ChatError(f"malformed chat completion: {what}")


def _all_objects(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, Mapping) for item in value)


def _kind(value: Any) -> str:
    return "a list holding non-objects" if isinstance(value, list) else f"of type {type(value).__name__}"


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class OpenAIChatClient:
    """Pooled async chat client with per-request timeouts and jittered exponential backoff.

    Connection errors, timeouts, 5xx, 408, 409 and 429 are retried up to ``max_retries`` times;
    other answers fail at once, and so does a body over ``max_body_bytes`` or one that is not a
    chat completion.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 300.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 16.0,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.max_body_bytes = max_body_bytes
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(headers=self.headers)
        return self._session

    async def close(self) -> None:
        """Close the pooled session."""
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    async def check_reachable(self, timeout: float = 10.0) -> None:
        """Raise :class:`ChatError` if nothing answers HTTP at the base URL (any status counts)."""
        why = await unreachable(self._get_session(), self.base_url + "/models", timeout)
        if why is not None:
            raise ChatError(f"cannot reach {self.base_url}: {why}")

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        sampling: Mapping[str, Any],
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> ChatReply:
        """One chat completion of ``messages`` (already in OpenAI form)."""
        payload: dict[str, Any] = {"model": self.model, "messages": list(messages), **sampling}
        if tools:
            payload["tools"] = list(tools)
        return parse_reply(await self._post(json.dumps(payload)))

    async def _post(self, data: str) -> Any:
        url = self.base_url + "/chat/completions"
        last = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                delay = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
                await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            try:
                async with self._get_session().post(
                    url,
                    data=data,
                    timeout=aiohttp.ClientTimeout(total=self.timeout),
                    allow_redirects=False,  # the prompt and the API key go to the named host only
                ) as resp:
                    try:
                        body = await read_capped(resp, self.max_body_bytes)
                    except BodyTooLarge as err:
                        cap = self.max_body_bytes
                        raise ChatError(f"{url}'s reply passed max_body_bytes={cap}: {err}") from None
                    if resp.status == 200:
                        try:
                            return json.loads(body)
                        except (ValueError, RecursionError) as err:  # bad JSON or UTF-8, or too deep
                            raise ChatError(f"{url} replied with invalid JSON: {err}") from err
                    excerpt = body[:300].decode("utf-8", errors="replace")
                    last = f"{url} answered HTTP {resp.status}: {excerpt}{redirect_note(resp)}"
                    if resp.status < 500 and resp.status not in _RETRY_STATUSES:
                        raise ChatError(last)
            except asyncio.TimeoutError:
                last = f"{url} gave no answer within {self.timeout} s"
            except aiohttp.ClientError as err:
                last = f"{url}: {type(err).__name__}: {err}"
        raise ChatError(f"{last} (after {self.max_retries + 1} attempts)")
