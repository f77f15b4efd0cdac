"""TRL's vLLM server (``trl vllm-serve``) as TRL's ``VLLMClient`` sees it, on loopback, generating
with the tiny test engine. vLLM does not install on these machines; this stands in for the endpoints
the client calls: ``/health``, ``/v1/models``, ``/v1/chat/completions/render`` (an image's features:
here its data URI, and where it sat in the throwaway conversation), ``/inference/v1/generate``
(token ids with features; the features' placeholders must point at the image-pad runs, as vLLM
requires) and ``/v1/completions`` (token ids alone)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from vlm_envs.testing import TinyEngine
from vlm_envs.testing.generation import SamplingParams
from vlm_envs.testing.server import decode_image


def image_runs(ids: list[int], token: int) -> list[dict[str, int]]:
    runs, i = [], 0
    while i < len(ids):
        if ids[i] == token:
            j = i
            while j < len(ids) and ids[j] == token:
                j += 1
            runs.append({"offset": i, "length": j - i})
            i = j
        else:
            i += 1
    return runs


class TrlVLLMStandIn:
    """Serve in a thread (context manager); ``requests`` keeps every generate request's body."""

    def __init__(self, engine: TinyEngine) -> None:
        self.engine = engine
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/health":
                    self._reply(200, {})
                elif self.path == "/v1/models":
                    self._reply(200, {"data": [{"id": "tiny"}]})
                else:
                    self._reply(404, {"error": self.path})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                try:
                    status, reply = 200, stand_in.answer(self.path, body)
                except ValueError as err:
                    status, reply = 400, {"error": str(err)}
                self._reply(status, reply)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> TrlVLLMStandIn:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path == "/v1/chat/completions/render":
            uris = [part["image_url"]["url"] for m in body["messages"] for part in m["content"]]
            placeholders = [
                {"offset": 3 + 10 * k, "length": 1} for k in range(len(uris))
            ]  # throwaway positions
            return {"features": {"images": uris, "mm_placeholders": {"image": placeholders}}}
        if path == "/inference/v1/generate":
            self.requests.append(body)
            ids, features = body["token_ids"], body["features"]
            images = [decode_image(uri) for uri in features["images"]] if features else []
            runs = image_runs(ids, self.engine.image_token_id)
            if features and features["mm_placeholders"]["image"] != runs:
                raise ValueError(
                    f"placeholders {features['mm_placeholders']['image']} are not the pad runs {runs}"
                )
            return {"choices": [self._generate(ids, images, body["sampling_params"], chat=True)]}
        if path == "/v1/completions":
            self.requests.append(body)
            (ids,) = body["prompt"]
            params = {k: v for k, v in body.items() if k not in ("model", "prompt")}
            return {"choices": [{"prompt_token_ids": ids, **self._generate(ids, [], params, chat=False)}]}
        raise ValueError(f"no endpoint {path}")

    def _generate(
        self, ids: list[int], images: list[Any], params: dict[str, Any], chat: bool
    ) -> dict[str, Any]:
        sampling = SamplingParams(
            max_new_tokens=int(params["max_tokens"]),
            temperature=float(params["temperature"]),
            stop_token_ids=tuple(params.get("stop_token_ids") or ()),
        )
        with self._lock:  # the tiny engine runs one request at a time
            out = self.engine.generate(self.engine.prepare(ids, images), sampling)
        tokens = [f"token_id:{t}" for t in out.token_ids]
        if chat:
            content = [
                {"token": t, "logprob": lp, "top_logprobs": []}
                for t, lp in zip(tokens, out.log_probs, strict=True)
            ]
            logprobs: dict[str, Any] = {"content": content}
        else:
            logprobs = {"tokens": tokens, "token_logprobs": out.log_probs, "top_logprobs": [{}] * len(tokens)}
        return {"token_ids": out.token_ids, "logprobs": logprobs, "finish_reason": out.finish_reason["type"]}
