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

from vlm_envs.imaging import png_data_uri

# HTTP statuses worth retrying: request timeout, rate limiting, and every server error.
_RETRY_STATUSES = frozenset({408, 409, 429})


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
    """The text an env sees for an assistant message: its content, then its tool calls in Hermes form."""
    text = message.get("content") or ""
    if not isinstance(text, str):  # some servers answer content parts
        text = "".join(p.get("text", "") for p in text if isinstance(p, Mapping))
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments: Any = function.get("arguments", "{}")
        # broken JSON arguments reach the env as the model wrote them
        with contextlib.suppress(json.JSONDecodeError):
            arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
        body = json.dumps({"name": function.get("name"), "arguments": arguments}, ensure_ascii=False)
        text += f"<tool_call>\n{body}\n</tool_call>"
    return text


def parse_reply(body: Any) -> ChatReply:
    """A :class:`ChatReply` from a decoded ``chat.completion`` object; :class:`ChatError` if malformed."""
    try:
        choice = body["choices"][0]
        message = dict(choice["message"])
        usage = body.get("usage") or {}
    except (KeyError, IndexError, TypeError) as err:
        raise ChatError(f"malformed chat completion ({type(err).__name__}: {err})") from err
    return ChatReply(
        text=reply_text(message),
        message=message,
        finish_reason=choice.get("finish_reason"),
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
    )


class OpenAIChatClient:
    """Pooled async chat client with per-request timeouts and jittered exponential backoff.

    Connection errors, timeouts, 5xx, 408, 409 and 429 are retried up to ``max_retries`` times;
    other answers fail at once.
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
    ) -> None:
        self.base_url = base_url.rstrip("/")
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
        try:
            async with self._get_session().get(
                self.base_url + "/models", timeout=aiohttp.ClientTimeout(total=timeout)
            ) as resp:
                await resp.read()
        except (aiohttp.ClientError, asyncio.TimeoutError) as err:
            raise ChatError(f"cannot reach {self.base_url}: {type(err).__name__}: {err}") from err

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
                    url, data=data, timeout=aiohttp.ClientTimeout(total=self.timeout)
                ) as resp:
                    body = await resp.text()
                    if resp.status == 200:
                        try:
                            return json.loads(body)
                        except json.JSONDecodeError as err:
                            raise ChatError(f"{url} replied with invalid JSON: {err}") from err
                    last = f"{url} answered HTTP {resp.status}: {body[:300]}"
                    if resp.status < 500 and resp.status not in _RETRY_STATUSES:
                        raise ChatError(last)
            except asyncio.TimeoutError:
                last = f"{url} gave no answer within {self.timeout} s"
            except aiohttp.ClientError as err:
                last = f"{url}: {type(err).__name__}: {err}"
        raise ChatError(f"{last} (after {self.max_retries + 1} attempts)")
