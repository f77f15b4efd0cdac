"""The ``openai:BASE_URL`` policy runs on the core install plus the ``openai`` extra (aiohttp only).

The eval runs in a fresh process whose import system refuses torch, transformers and tokenizers (a
``sys.meta_path`` guard), against a real chat server on loopback; the process then reports which of
them ended up in ``sys.modules``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

GUARDED = ("torch", "transformers", "tokenizers")

CHILD = """
import importlib.abc, json, sys

GUARDED = {guarded!r}

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in GUARDED:
            raise ImportError(f"{{name}} is not installed (the openai extra has no torch)")
        return None

sys.meta_path.insert(0, Refuse())
from vlm_envs.cli import main

code = main({argv!r})
print(json.dumps({{"code": code, "loaded": sorted(m for m in sys.modules if m.split(".")[0] in GUARDED)}}))
"""


@pytest.fixture
def chat_server() -> Iterator[str]:
    """A chat server on loopback that always names the colour red."""
    loop = asyncio.new_event_loop()
    runner_box: dict[str, web.AppRunner] = {}
    ready = threading.Event()

    async def complete(request: web.Request) -> web.Response:
        await request.json()
        message = {"role": "assistant", "content": "<answer>red</answer>"}
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return web.json_response({"choices": [choice], "usage": usage})

    async def serve() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", complete)
        app.router.add_get("/v1/models", lambda r: web.json_response({"data": []}))
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runner_box["runner"] = runner
        runner_box["port"] = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        ready.set()

    thread = threading.Thread(
        target=lambda: (loop.run_until_complete(serve()), loop.run_forever()), daemon=True
    )
    thread.start()
    assert ready.wait(10)
    yield f"http://127.0.0.1:{runner_box['port']}/v1"
    asyncio.run_coroutine_threadsafe(runner_box["runner"].cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


def test_openai_policy_never_imports_torch(chat_server: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = ["eval", "toyenvs.colors", "--policy", f"openai:{chat_server}", "--model", "m", "-n", "4"]
    argv += ["--out", str(out), "--quiet"]
    src = Path(__file__).resolve().parents[2] / "src"
    support = Path(__file__).resolve().parents[1] / "support"
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(support)])}
    code = CHILD.format(guarded=GUARDED, argv=argv)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"code": 0, "loaded": []}, proc.stderr
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all(r["turns"][1]["model_text"] == "<answer>red</answer>" for r in records)
    assert {r["status"] for r in records} <= {"completed", "truncated"}


def test_the_guard_does_refuse_torch() -> None:
    code = CHILD.split("from vlm_envs.cli")[0].format(guarded=GUARDED) + "import torch\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "the openai extra has no torch" in proc.stderr
