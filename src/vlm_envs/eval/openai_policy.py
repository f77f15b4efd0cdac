"""The ``openai:BASE_URL`` policy: a model behind any OpenAI-compatible chat server."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from vlm_envs.eval.balance import LeastInFlight
from vlm_envs.eval.openai_chat import ChatError, OpenAIChatClient, to_openai_messages
from vlm_envs.eval.policies import EpisodeState, ModelError, PolicyError, PolicyOptions, Reply, TurnPolicy


class OpenAIPolicy(TurnPolicy):
    """A model behind an OpenAI-compatible ``/chat/completions`` (images as data URIs).

    ``base_url`` is one server or several (repeated ``--base-url``): requests are balanced over them
    by requests in flight (see :class:`~vlm_envs.eval.balance.LeastInFlight`).
    """

    def __init__(self, base_url: str | Sequence[str], options: PolicyOptions) -> None:
        if not options.model:
            raise PolicyError("policy 'openai:...' needs --model NAME (the model name the server serves)")
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        self.name = "openai:" + ",".join(urls)
        self.options = options
        clients = [
            OpenAIChatClient(
                url,
                options.model,
                api_key=options.api_key,
                timeout=options.timeout,
                max_retries=options.max_retries,
            )
            for url in urls
        ]
        self.clients = LeastInFlight(urls, clients)
        self.sampling = {"temperature": options.temperature, "max_tokens": options.max_tokens}

    async def start(self) -> None:
        try:
            for client in self.clients.clients:  # every server must answer before the run starts
                await client.check_reachable()
        except ChatError as err:
            await self.close()
            raise PolicyError(str(err)) from err

    async def close(self) -> None:
        for client in self.clients.clients:
            await client.close()

    async def reply(self, state: EpisodeState) -> Reply:
        tools_of = getattr(state.env, "tools", None)
        tools = tools_of() if self.options.tools and callable(tools_of) else None
        messages = await asyncio.to_thread(to_openai_messages, state.messages)
        try:
            with self.clients.lend() as client:
                out = await client.complete(messages, self.sampling, tools)
        except ChatError as err:
            raise ModelError(str(err)) from err
        message = {"role": "assistant", "content": out.message.get("content") or ""}
        if out.message.get("tool_calls"):
            message["tool_calls"] = out.message["tool_calls"]
        return Reply(out.text, message, out.prompt_tokens, out.completion_tokens, out.finish_reason)
