"""Who may use the proxy, and which key goes upstream.

Passthrough (no api_keys): the client's own Authorization (or x-api-key, Anthropic's header) goes upstream
untouched. Proxy keys (api_keys set): a client must present one of them, as a Bearer token or as x-api-key; its
credentials are then dropped and the key the proxy holds for that upstream, if any, is sent instead:
upstream_api_key as a Bearer token to the OpenAI-compatible upstream, anthropic_api_key as x-api-key to Anthropic's.
Keys are never logged, echoed or forwarded elsewhere.
"""

from __future__ import annotations

import hashlib
import hmac

from app.edge.errors import ApiError
from app.edge.headers import RawHeaders
from app.settings import Api, Settings

# Separates these digests from any other SHA-256 of the same key (Keys compares keys by their plain digest).
_SCOPE_DOMAIN = b"compaction-proxy client scope v1\x00"
_CLIENT_CREDENTIALS = (b"authorization", b"x-api-key")


class OpenRelayError(ValueError):
    """An upstream or summariser key with nothing guarding it: whoever reaches the port could spend it."""


def _digest(key: str) -> bytes:
    # Comparing fixed-length digests keeps the time spent independent of the keys' lengths too.
    return hashlib.sha256(key.encode()).digest()


def _bearer_token(authorization: str | None) -> str:
    """The token of `Authorization: Bearer <token>` (any case of the scheme); "" for anything else."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _refuse_open_relay(setting: str, key: str, what: str) -> None:
    if key:
        raise OpenRelayError(
            f"{setting} is set but api_keys is empty, so anyone who can reach the port would spend {what}. "
            "Set api_keys (COMPACTION_API_KEYS) to the keys clients must send, or set allow_unauthenticated = true "
            "if something else guards the port."
        )


class Keys:
    def __init__(self, settings: Settings) -> None:
        """Raises OpenRelayError for an upstream or summariser key without proxy keys, unless explicitly allowed."""
        self._accepted = [_digest(key.get_secret_value()) for key in settings.api_keys]
        upstream = settings.upstream_api_key.get_secret_value().strip()  # a stray newline from a secrets file
        anthropic = settings.anthropic_api_key.get_secret_value().strip()
        if not self._accepted and not settings.allow_unauthenticated:
            _refuse_open_relay("upstream_api_key", upstream, "the upstream key")
            _refuse_open_relay("anthropic_api_key", anthropic, "the Anthropic key")
            # Any request may ask for the notes strategy, and so for summariser calls made with this key.
            _refuse_open_relay(
                "summariser_api_key", settings.summariser_api_key.get_secret_value().strip(), "the summariser key"
            )
        # What each upstream gets in place of the client's credentials when the proxy holds a key for it.
        self._upstream: dict[Api, tuple[bytes, bytes] | None] = {
            "openai": (b"authorization", f"Bearer {upstream}".encode()) if upstream else None,
            "anthropic": (b"x-api-key", anthropic.encode()) if anthropic else None,
        }

    def _accepts(self, token: str) -> bool:
        presented = _digest(token)
        # Every configured key is compared, match or not, so timing does not tell which one was close.
        matched = False
        for accepted in self._accepted:
            matched |= hmac.compare_digest(presented, accepted)
        return matched

    def _presented(self, authorization: str | None, api_key: str | None) -> list[str]:
        """The proxy keys a client may have sent: its Bearer token, its x-api-key."""
        return [token for token in (_bearer_token(authorization), (api_key or "").strip()) if token]

    def check(self, authorization: str | None, api_key: str | None = None) -> None:
        """Raises a 401 ApiError unless one of api_keys was sent as `Authorization: Bearer <key>` or as
        `x-api-key: <key>` (or none are set).
        """
        if not self._accepted:
            return
        presented = self._presented(authorization, api_key)
        if not presented:
            raise ApiError(
                401,
                "Missing API key: send one of the proxy's keys as 'Authorization: Bearer <key>' or 'x-api-key: <key>'.",
                code="missing_api_key",
                headers={"www-authenticate": "Bearer"},
            )
        matched = False
        for token in presented:
            matched |= self._accepts(token)
        if not matched:
            raise ApiError(
                401,
                "Incorrect API key provided.",
                code="invalid_api_key",
                headers={"www-authenticate": 'Bearer error="invalid_token"'},
            )

    def client_scope(self, headers: RawHeaders) -> bytes:
        """Who is asking, as a digest that never reveals the credential itself: what the proxy keeps for a client
        (the prompt-cache report's state, notes) is scoped by it, so no client sees or overwrites another's.

        Proxy keys: the proxy key presented (check() has accepted it). Otherwise the credential the client
        brings for the upstream, its Authorization and x-api-key (Anthropic's header). b"" for a client that
        sends neither: anonymous clients share one scope, as they share everything else.
        """
        if self._accepted:
            found = {n.lower(): v.decode("latin-1") for n, v in headers if n.lower() in _CLIENT_CREDENTIALS}
            presented = self._presented(found.get(b"authorization"), found.get(b"x-api-key"))
            key = next((token for token in presented if self._accepts(token)), presented[0] if presented else "")
            parts = [b"proxy-key", key.encode("latin-1")]
        else:
            parts = [n.lower() + b":" + v.strip() for n, v in headers if n.lower() in _CLIENT_CREDENTIALS]
            if not parts:
                return b""
        scope = hashlib.sha256(_SCOPE_DOMAIN)
        for part in parts:
            scope.update(len(part).to_bytes(4, "big") + part)  # length-prefixed: no two lists run together alike
        return scope.digest()

    def outgoing(self, headers: RawHeaders, api: Api = "openai") -> RawHeaders:
        """The request headers for that upstream, with the credentials this mode calls for."""
        held = self._upstream[api]
        # With keys of its own the proxy decides what goes upstream; otherwise the client does.
        if not (self._accepted or held):
            return headers
        out = [(name, value) for name, value in headers if name.lower() not in _CLIENT_CREDENTIALS]
        if held is not None:
            out.append(held)
        return out
