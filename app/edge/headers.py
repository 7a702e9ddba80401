"""Which headers cross the proxy, in each direction. Raw (bytes) pairs, so values pass byte for byte."""

from __future__ import annotations

from collections.abc import Iterable

RawHeaders = list[tuple[bytes, bytes]]

# RFC 9110 section 7.6.1: meaningful for one connection only, never forwarded.
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
COMPACTION_PREFIX = b"x-compaction-"
# The proxy's own headers, the only places their names are written (lower case, as ASGI gives them). None of
# them is ever forwarded upstream (COMPACTION_PREFIX).
STRATEGIES = b"x-compaction-strategies"  # request: the chain; response: the chain that ran
INTERNAL = b"x-compaction-internal"  # request: a proxy's own summariser call, never compacted
TOKENS_BEFORE = b"x-compaction-tokens-before"
TOKENS_AFTER = b"x-compaction-tokens-after"
FALLBACK = b"x-compaction-fallback"
PREFIX = b"x-compaction-prefix"
EXPANSIONS = b"x-compaction-expansions"  # response: expand rounds the proxy answered (whole answers only)
RETRIED = b"x-compaction-retried"  # response: sent again once, compacted to the window the upstream stated
REQUEST_ID = b"x-compaction-request-id"
CLIENT_REQUEST_ID = b"x-request-id"  # the client's own id, which REQUEST_ID echoes
# Recomputed for the body actually sent, or describing the upstream server rather than the proxy.
_NOT_TO_UPSTREAM = frozenset({b"host", b"content-length", b"accept-encoding"})
_NOT_TO_CLIENT = frozenset({b"content-length", b"date", b"server", b"set-cookie", b"alt-svc"})


def _dropped(headers: RawHeaders, always: frozenset[bytes]) -> frozenset[bytes]:
    listed = {
        token.strip().lower() for name, value in headers if name.lower() == b"connection" for token in value.split(b",")
    }
    return always | HOP_BY_HOP | listed


def upstream_request_headers(
    headers: Iterable[tuple[bytes, bytes]], *, keep_content_length: bool = False
) -> RawHeaders:
    """Client headers to send upstream: Authorization, OpenAI-Organization/-Project and the rest pass;
    hop-by-hop and X-Compaction-* headers do not. Accept-Encoding is the client's own or identity, so
    the raw body relayed back is always in an encoding the client asked for.
    """
    headers = list(headers)
    dropped = _dropped(headers, _NOT_TO_UPSTREAM - ({b"content-length"} if keep_content_length else set()))
    out = [
        (name, value)
        for name, value in headers
        if name.lower() not in dropped and not name.lower().startswith(COMPACTION_PREFIX)
    ]
    accept = [value for name, value in headers if name.lower() == b"accept-encoding"]
    out.append((b"accept-encoding", accept[0] if accept else b"identity"))
    return out


def client_response_headers(headers: Iterable[tuple[bytes, bytes]]) -> RawHeaders:
    """Upstream response headers to relay: content-type, retry-after, x-request-id, openai-*,
    x-ratelimit-* and the rest, less hop-by-hop ones and those that describe the upstream server.
    """
    headers = list(headers)
    dropped = _dropped(headers, _NOT_TO_CLIENT)
    return [(name, value) for name, value in headers if name.lower() not in dropped]
