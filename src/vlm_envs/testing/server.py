"""An aiohttp server speaking SGLang's native ``/generate`` on top of a tiny local model.

Request: ``{input_ids, image_data: [data URIs], sampling_params, return_logprob}``. Reply:
``{text, meta_info: {id, finish_reason: {type: stop|length|abort, ...}, prompt_tokens,
completion_tokens, output_token_logprobs: [[logprob, token_id, None], ...]}}``, as SGLang answers.
Faults queued with :meth:`SGLangTestServer.inject` replace the answers to the next requests, so
tests can exercise retries, timeouts, aborts, malformed replies and every break of the reply
contract over real HTTP (see :class:`~vlm_envs.testing.faults.Fault`).

Run it in a thread of the test process (:class:`SGLangTestServer`) or as its own process
(``python -m vlm_envs.testing``, see :class:`ServerProcess`), where faults are queued with
``POST /_test/faults``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import concurrent.futures
import dataclasses
import io
import json
import socket
import subprocess
import sys
import threading
import urllib.request
from typing import Any

from aiohttp import web
from PIL import Image

from vlm_envs.testing.faults import CORRUPTIONS, STREAMED, Fault, FaultQueue, corrupt_reply, stream_reply
from vlm_envs.testing.generation import SamplingParams, TinyEngine

#: The finish reason of an aborted request, as SGLang gives it.
ABORTED = {"type": "abort", "message": "Abort by test server"}


def decode_image(item: Any) -> Image.Image:
    """A PIL image from a base64 data URI or bare base64 (no paths or URLs: the server is offline)."""
    if not isinstance(item, str):
        raise ValueError("image_data items must be strings")
    if item.startswith("data:"):
        header, _, item = item.partition(",")
        if not header.endswith(";base64"):
            raise ValueError("image data URIs must be base64")
    try:
        image = Image.open(io.BytesIO(base64.b64decode(item, validate=True)))
        image.load()
    except (binascii.Error, OSError, ValueError) as err:
        raise ValueError(f"undecodable image: {err}") from err
    return image


class SGLangTestServer:
    """The test server, running on its own event loop in a daemon thread of this process.

    Use as a context manager or call :meth:`start` / :meth:`stop`; ``url`` is set once started.
    ``requests`` records every ``/generate`` payload received (image data replaced by its count,
    the client's address under ``_peer``).
    """

    def __init__(self, engine: TinyEngine, host: str = "127.0.0.1", port: int = 0) -> None:
        self.engine = engine
        self.host = host
        self.port = port
        self.url = ""
        self.requests: list[dict[str, Any]] = []
        self._faults = FaultQueue()
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="tiny-engine"
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._next_id = 0

    # ---- control ----------------------------------------------------------------------------------

    def inject(self, fault: Fault, times: int = 1) -> None:
        """Apply ``fault`` to each of the next ``times`` requests (after faults already queued)."""
        self._faults.push(fault, times)

    def clear_faults(self) -> None:
        """Drop every queued fault."""
        self._faults.clear()

    def app(self) -> web.Application:
        """The aiohttp application (routes: /generate, /health, /get_model_info, /_test/*)."""
        app = web.Application(client_max_size=256 << 20)
        app.router.add_post("/generate", self._generate)
        app.router.add_get("/health", self._health)
        app.router.add_get("/get_model_info", self._model_info)
        app.router.add_post("/_test/faults", self._post_fault)
        app.router.add_get("/_test/requests", self._get_requests)
        return app

    def start(self) -> str:
        """Start serving in a background thread; returns the base URL."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        self.url = f"http://{self.host}:{self.port}"
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def serve() -> None:
            self._runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=1.0)
            await self._runner.setup()
            await web.SockSite(self._runner, sock).start()
            ready.set()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(serve())  # type: ignore[union-attr]
            self._loop.run_forever()  # type: ignore[union-attr]

        self._thread = threading.Thread(target=run, name="sglang-test-server", daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("the test server did not start within 30 s")
        return self.url

    def stop(self) -> None:
        """Stop serving and join the thread; calling it twice is fine."""
        if self._loop is None or self._thread is None:
            return
        loop, runner = self._loop, self._runner
        if runner is not None:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(30)
        loop.close()
        self._loop = self._thread = self._runner = None
        self._executor.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> SGLangTestServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- handlers ---------------------------------------------------------------------------------

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _model_info(self, request: web.Request) -> web.Response:
        name = type(self.engine.model).__name__
        return web.json_response({"model_path": f"tiny-{name}", "is_generation": True})

    async def _post_fault(self, request: web.Request) -> web.Response:
        data = await request.json()
        self.inject(Fault.from_json(data["fault"]), int(data.get("times", 1)))
        return web.json_response({"ok": True})

    async def _get_requests(self, request: web.Request) -> web.Response:
        return web.json_response(self.requests)

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        try:
            payload = await request.json()
            if not isinstance(payload, dict):
                raise ValueError("the body must be a JSON object")
        except (json.JSONDecodeError, ValueError) as err:
            return web.json_response({"error": f"bad request body: {err}"}, status=400)
        image_data = payload.get("image_data") or []
        image_data = [image_data] if isinstance(image_data, str) else image_data
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.requests.append({**payload, "image_data": len(image_data), "_peer": list(peer or ())})
        fault = self._faults.pop()
        if fault is not None and fault.kind in ("delay", "tokens"):
            await asyncio.sleep(fault.seconds)
        elif fault is not None and (
            fault.kind in ("status", "body", "drop") or (fault.kind == "abort" and not fault.size)
        ):
            return self._fault_response(request, fault)
        try:
            params = SamplingParams.from_request(payload.get("sampling_params") or {})
            images = [decode_image(item) for item in image_data]
            loop = asyncio.get_running_loop()
            inputs = await loop.run_in_executor(
                self._executor, self.engine.prepare, payload["input_ids"], images
            )
        except (KeyError, TypeError, ValueError) as err:
            return web.json_response({"error": f"{type(err).__name__}: {err}"}, status=400)
        if fault is not None and (fault.kind == "tokens" or (fault.kind == "abort" and fault.token_ids)):
            gen = await loop.run_in_executor(
                self._executor, self.engine.script, inputs, fault.token_ids, params
            )
        else:
            gen = await loop.run_in_executor(self._executor, self.engine.generate, inputs, params)
        if fault is not None and fault.kind == "abort":  # aborted mid-generation: the tokens so far
            kept = gen.token_ids[: fault.size]
            text = self.engine.tokenizer.decode(kept, skip_special_tokens=params.skip_special_tokens)
            gen = dataclasses.replace(
                gen, token_ids=kept, log_probs=gen.log_probs[: fault.size], finish_reason=ABORTED, text=text
            )
        self._next_id += 1
        meta: dict[str, Any] = {
            "id": f"req-{self._next_id}",
            "finish_reason": gen.finish_reason,
            "prompt_tokens": len(inputs.input_ids),
            "completion_tokens": len(gen.token_ids),
        }
        if payload.get("return_logprob"):
            meta["output_token_logprobs"] = [
                [lp, t, None] for lp, t in zip(gen.log_probs, gen.token_ids, strict=True)
            ]
        reply = {"text": gen.text, "meta_info": meta}
        if fault is not None and fault.kind in CORRUPTIONS:
            reply = corrupt_reply(reply, fault, len(self.engine.tokenizer))
        elif fault is not None and fault.kind in STREAMED:
            return await stream_reply(request, reply, fault)
        return web.json_response(reply)

    def _fault_response(self, request: web.Request, fault: Fault) -> web.Response:
        if fault.kind == "status":
            return web.json_response({"error": f"injected HTTP {fault.status}"}, status=fault.status)
        if fault.kind == "body":
            status = 200 if fault.status == 500 else fault.status
            return web.Response(text=fault.body, status=status, content_type="application/json")
        if fault.kind == "abort":
            self._next_id += 1
            meta = {
                "id": f"req-{self._next_id}",
                "finish_reason": ABORTED,
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "output_token_logprobs": [],
            }
            return web.json_response({"text": "", "meta_info": meta})
        if fault.kind == "drop":
            assert request.transport is not None
            request.transport.abort()
            return web.Response(status=500)
        raise ValueError(f"unknown fault kind {fault.kind!r}")


class ServerProcess:
    """The test server in a child process (``python -m vlm_envs.testing``).

    The child builds the same tiny processor and model from ``family`` and ``seed`` (building is
    deterministic), so its outputs can be checked against an in-process copy; or it loads them from
    ``model_dir`` (a :func:`~vlm_envs.testing.save_tiny_model` folder, as a real engine would).
    """

    def __init__(
        self, family: str = "qwen2_vl", seed: int = 0, timeout: float = 120.0, model_dir: str | None = None
    ) -> None:
        cmd = [sys.executable, "-m", "vlm_envs.testing", "--family", family, "--seed", str(seed)]
        cmd += ["--model", model_dir] if model_dir is not None else []
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        self._ready_line = ""
        reader = threading.Thread(target=self._read_ready, daemon=True)
        reader.start()
        reader.join(timeout)
        line = self._ready_line
        if not line.startswith("READY "):
            self.stop()
            raise RuntimeError(f"the server process did not start (got {line!r})")
        self.url = line.split()[1]

    def _read_ready(self) -> None:
        assert self.proc.stdout is not None
        self._ready_line = self.proc.stdout.readline().strip()

    def inject(self, fault: Fault, times: int = 1) -> None:
        """Queue a fault in the child through ``POST /_test/faults``."""
        body = json.dumps({"fault": dataclasses.asdict(fault), "times": times}).encode()
        req = urllib.request.Request(
            self.url + "/_test/faults", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            resp.read()

    def stop(self) -> None:
        """Terminate the child and wait for it; calling it twice is fine."""
        stop_process(self.proc)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stop_process(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """Terminate ``proc`` and wait for it, killing it if it outlives ``grace_s``; an ended one is left."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def build_test_engine(family: str = "qwen2_vl", seed: int = 0, model_dir: str | None = None) -> TinyEngine:
    """The tiny processor and model of ``family`` behind a :class:`TinyEngine`, or those saved in
    ``model_dir``."""
    from vlm_envs.testing.models import build_tiny_processor, build_tiny_qwen2_vl, build_tiny_qwen3_vl

    if model_dir is not None:
        from transformers import AutoModelForImageTextToText

        from vlm_envs.rollout.processors import load_processor

        model = AutoModelForImageTextToText.from_pretrained(model_dir).eval()
        return TinyEngine(model, load_processor(model_dir), seed=seed)
    processor = build_tiny_processor(family)
    build = build_tiny_qwen2_vl if family == "qwen2_vl" else build_tiny_qwen3_vl
    return TinyEngine(build(processor, seed=seed), processor, seed=seed)


def main(argv: list[str] | None = None) -> None:
    """Serve until terminated; prints ``READY <url>`` once listening."""
    parser = argparse.ArgumentParser(
        prog="python -m vlm_envs.testing",
        description="Serve a tiny random Qwen-VL-style model, built offline in code, on SGLang's native "
        "/generate API (with /health and /get_model_info), so the rollout, the slime hook and "
        "`vlm-envs eval --policy sglang:URL` run without a GPU or a download. Prints `READY <url>` "
        "once listening and serves until terminated. Needs the rollout extra (torch, transformers).",
        epilog="example: python -m vlm_envs.testing --port 30000, then play against "
        "SGLangEngine('http://127.0.0.1:30000') with ChatCodec(vlm_envs.testing.build_tiny_processor()).",
    )
    parser.add_argument(
        "--family", default="qwen2_vl", choices=["qwen2_vl", "qwen3_vl"], help="model and processor family"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights (default 0)")
    parser.add_argument("--model", help="serve the model and processor saved in this folder instead")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default 0: a free one)")
    args = parser.parse_args(argv)
    server = SGLangTestServer(build_test_engine(args.family, args.seed, args.model), args.host, args.port)
    server.start()
    print(f"READY {server.url}", flush=True)
    threading.Event().wait()
