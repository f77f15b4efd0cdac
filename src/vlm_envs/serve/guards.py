"""What guards the door of ``vlm-envs serve``: the bearer token, the body cap and one-line errors."""

from __future__ import annotations

import hmac
import json
from typing import Any

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

#: WebSocket close codes (RFC 6455): a refused or broken rule, and "try again later" (capacity).
CLOSE_POLICY = 1008
CLOSE_TRY_LATER = 1013
#: How deep a request's JSON may nest (a client's env config is checked at 32 levels further on).
MAX_JSON_DEPTH = 64


class ApiError(Exception):
    """An HTTP error answered as ``{"detail": message}`` (FastAPI's shape, which OpenEnv uses)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message)


def error_response(status: int, message: str) -> JSONResponse:
    return JSONResponse({"detail": message}, status_code=status)


class BearerToken:
    """ASGI middleware: every HTTP request and WebSocket must carry ``Authorization: Bearer TOKEN``,
    but HTTP requests to ``open_paths`` (a liveness probe carries no header)."""

    def __init__(self, app: ASGIApp, token: str, open_paths: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.expected = b"Bearer " + token.encode()
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or (
            scope["type"] == "http" and scope["path"] in self.open_paths
        ):
            await self.app(scope, receive, send)
            return
        given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        if hmac.compare_digest(given, self.expected):
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":  # closed before the handshake: the client sees HTTP 403
            await send({"type": "websocket.close", "code": CLOSE_POLICY, "reason": "missing or wrong token"})
        else:
            await error_response(401, "missing or wrong bearer token (Authorization: Bearer TOKEN)")(
                scope, receive, send
            )


async def read_json(request: Request, cap: int) -> dict[str, Any]:
    """The request's JSON object, read up to ``cap`` bytes: 413 past it, 400 for anything not a JSON
    object."""
    length = request.headers.get("content-length")
    if length is not None and length.isascii() and length.isdigit() and int(length) > cap:
        raise ApiError(413, f"request body of {length} bytes is over the cap of {cap} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise ApiError(413, f"request body is over the cap of {cap} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw:
        return {}
    return json_object(raw, ApiError)


def json_object(raw: bytes | str, error: type[ApiError]) -> dict[str, Any]:
    """``raw`` parsed as a JSON object nested at most :data:`MAX_JSON_DEPTH` deep, without Python's
    ``NaN``/``Infinity`` extensions; ``error(400, ...)`` otherwise. (``json.loads`` itself stops at
    the interpreter's recursion limit, with a RecursionError, before the stack would.)"""
    try:
        value = json.loads(raw, parse_constant=_not_json)
    except (ValueError, RecursionError) as err:
        raise error(400, f"malformed JSON: {' '.join(str(err).split())[:200]}") from None
    if not isinstance(value, dict):
        raise error(400, f"expected a JSON object, got {type(value).__name__}")
    if too_deep(value, MAX_JSON_DEPTH):
        raise error(400, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return value


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def too_deep(value: Any, limit: int) -> bool:
    """Whether ``value``'s objects and arrays nest deeper than ``limit`` (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


def validated(model: type[BaseModel], data: Any) -> Any:
    """``data`` as ``model``; 422 naming the first problem otherwise."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "body"
        raise ApiError(422, f"invalid {where}: {first.get('msg', 'invalid value')}") from None
