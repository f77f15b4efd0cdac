"""``/ws``: one WebSocket connection is one session, as OpenEnv's client plays it.

Messages in: ``{"type": "reset" | "step" | "state" | "close", "data": {...}}``, and ours, ``random``
(the env's own random reply) and ``snapshot`` (the episode's; a reset with a ``snapshot`` field
continues one: :mod:`vlm_envs.serve.wire`); out: an ``observation``, ``state``, ``random`` or
``snapshot`` frame, or an ``error`` frame ``{"message", "code", "status"}`` (the status an HTTP call
would have answered). Past ``--max-sessions`` the connection is accepted, told
``CAPACITY_REACHED`` and closed with 1013 (try again later) at once. A session idle past the timeout
is told why and closed (1000).
"""

from __future__ import annotations

import contextlib
from typing import Any

from pydantic import ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect

from vlm_envs.errors import one_line
from vlm_envs.serve.guards import CLOSE_TRY_LATER, ApiError, json_object
from vlm_envs.serve.service import Service
from vlm_envs.serve.sessions import Refused, Session
from vlm_envs.serve.wire import (
    CAPACITY_REACHED,
    EXECUTION_ERROR,
    INVALID_JSON,
    SESSION_ERROR,
    UNKNOWN_TYPE,
    VALIDATION_ERROR,
    Action,
    RandomState,
    ResetFields,
    ws_error,
    ws_frame,
)

#: The OpenEnv error code of each HTTP status we answer.
_CODES = {400: INVALID_JSON, 404: VALIDATION_ERROR, 409: EXECUTION_ERROR, 422: VALIDATION_ERROR}
#: WebSocket close code for an idle session closed by the server (normal closure).
CLOSE_NORMAL = 1000


def _error(status: int, message: str) -> str:
    code = _CODES.get(status, SESSION_ERROR if status in (410, 500) else EXECUTION_ERROR)
    if status == 503:
        code = CAPACITY_REACHED
    return ws_error(message, code).replace('"code"', f'"status":{status},"code"', 1)


async def websocket_endpoint(websocket: WebSocket, service: Service) -> None:
    """Serve one session over ``websocket`` until the client closes it or the server does; a client
    that leaves without a close frame ends its session quietly (nothing is logged)."""
    with contextlib.suppress(WebSocketDisconnect):
        await _serve(websocket, service)


async def _serve(websocket: WebSocket, service: Service) -> None:
    await websocket.accept()
    try:
        session = service.sessions.open(websocket=True)
    except Refused as err:
        await websocket.send_text(_error(503, str(err)))
        await websocket.close(CLOSE_TRY_LATER, reason="at capacity")
        return
    session.on_close = lambda reason: service.background(_close(websocket, reason))
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
            raw = message.get("text") if message.get("text") is not None else message.get("bytes") or b""
            reply = await _answer(raw, session, service)
            if reply is None:
                break
            await websocket.send_text(reply if isinstance(reply, str) else reply.decode())
    except (WebSocketDisconnect, RuntimeError):  # the client went away (or we closed it: idle)
        pass
    finally:
        service.forget(session)
        with contextlib.suppress(RuntimeError):
            await websocket.close()


async def _answer(raw: str | bytes, session: Session, service: Service) -> str | bytes | None:
    """The reply frame to one message; ``None`` for ``close``."""
    try:
        message = json_object(raw, ApiError)
        kind = message.get("type")
        data: Any = message.get("data") or {}
        if kind == "close":
            return None
        if not isinstance(data, dict):
            raise ApiError(422, f"data must be a JSON object, got {type(data).__name__}")
        if kind == "reset":
            payload = service.reset_payload(ResetFields.model_validate(data))
            status, body = await service.call(session, "reset", payload)
        elif kind == "step":
            status, body = await service.call(session, "step", Action.model_validate(data).text)
        elif kind in ("state", "random", "snapshot"):
            if kind == "snapshot" and data:
                raise ApiError(422, "snapshot takes no data: a WebSocket's snapshot is its own session's")
            payload = RandomState.model_validate(data).model_dump() if kind == "random" else None
            status, body = await service.call(session, kind, payload)
            if status == 200:
                return ws_frame(kind, body)
        else:
            known = "reset, step, state, random, snapshot or close"
            return ws_error(f"unknown message type {str(kind)[:40]!r}: {known}", UNKNOWN_TYPE)
        if status != 200:
            return _error(status, body.decode(errors="replace"))
        return ws_frame("observation", body)
    except ApiError as err:
        return _error(err.status, err.message)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "data"
        return _error(422, f"invalid {where}: {first.get('msg', 'invalid value')}")
    except Exception as err:  # nothing a client sends may end its connection without an answer
        return _error(500, one_line(err, typed=True))


async def _close(websocket: WebSocket, reason: str) -> None:
    with contextlib.suppress(Exception):  # the client may be gone already
        await websocket.send_text(ws_error(reason, SESSION_ERROR))
        await websocket.close(CLOSE_NORMAL, reason=reason[:120])
