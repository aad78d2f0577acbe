"""The controller's HTTP plumbing below FastAPI: a request body limit that answers 413 before the app."""

from __future__ import annotations

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    """Refuse bodies above ``limit`` bytes with 413, by Content-Length or as they stream in."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for k, v in scope.get("headers", []):
            if k == b"content-length":
                try:
                    n = int(v)
                except ValueError:
                    await _send_error(send, 400, "Content-Length is not a number")
                    return
                if n > self.limit:
                    await _send_error(send, 413, f"request body over {self.limit} bytes")
                    return
        chunks: list[bytes] = []  # without a Content-Length, read (at most limit + 1 bytes) before the app
        seen = 0
        while True:
            msg = await receive()
            if msg["type"] != "http.request":
                await self.app(scope, receive, send)
                return
            chunks.append(msg.get("body", b""))
            seen += len(chunks[-1])
            if seen > self.limit:
                await _send_error(send, 413, f"request body over {self.limit} bytes")
                return
            if not msg.get("more_body", False):
                break
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _send_error(send: Send, status: int, message: str) -> None:
    resp = JSONResponse({"error": message}, status_code=status)
    await resp({"type": "http"}, _no_receive, send)


async def _no_receive() -> Message:  # pragma: no cover - never called for a plain response
    return {"type": "http.disconnect"}
