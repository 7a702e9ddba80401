"""The request body limit: refused up front when Content-Length says too much, else counted as it arrives."""

from __future__ import annotations

from collections.abc import AsyncIterator

from starlette.requests import Request

from .errors import ApiError


def too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        f"The request body is larger than this proxy accepts ({limit} bytes; setting max_body_bytes).",
        code="request_too_large",
    )


def _check_declared(request: Request, limit: int) -> None:
    declared = request.headers.get("content-length")
    # The server has already rejected a malformed Content-Length; a chunked body declares none.
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(limit)


async def _counted(chunks: AsyncIterator[bytes], limit: int) -> AsyncIterator[bytes]:
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        yield chunk


def limited_stream(request: Request, limit: int) -> AsyncIterator[bytes]:
    """The body as it arrives. Raises a 413 ApiError now if Content-Length announces more than `limit`
    bytes (so nothing is sent upstream), or while iterating once more than that has arrived.
    """
    _check_declared(request, limit)
    return _counted(request.stream(), limit)


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, refused with a 413 ApiError before more than `limit` bytes are held in memory."""
    return b"".join([chunk async for chunk in limited_stream(request, limit)])
