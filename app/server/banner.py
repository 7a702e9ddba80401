"""What the proxy says when it starts: where to point each client, where each route forwards, what it does by
default. Logged once by the command (not per worker), and never a key: base URLs go through printable_url.
"""

from __future__ import annotations

from app.settings import Settings
from app.upstream.client import base_urls, printable_url
from app.wire import wire_formats

# Addresses that accept every interface: a client on this host reaches them on loopback.
_ANY = {"0.0.0.0", "::", ""}


def client_url(settings: Settings) -> str:
    """The proxy's base URL as a client on this host writes it (IPv6 in brackets)."""
    host = settings.host
    if host in _ANY:
        host = "127.0.0.1" if host != "::" else "::1"
    return f"http://{f'[{host}]' if ':' in host else host}:{settings.port}"


def banner(settings: Settings) -> list[str]:
    base = client_url(settings)
    upstreams = {api: printable_url(url) for api, url in base_urls(settings).items()}
    listening = f"compaction-proxy on {base}" + (
        f" (listening on {settings.host or 'every address'})" if settings.host in _ANY else ""
    )
    lines = [
        listening,
        f"  point clients at it: OPENAI_BASE_URL={base}/v1  ANTHROPIC_BASE_URL={base}",
        *(f"  {wire.path} -> {upstreams[wire.api]}/{wire.upstream_path}" for wire in wire_formats()),
        f"  strategies by default: {settings.default_strategies} (a request picks others with X-Compaction-Strategies)",
    ]
    if settings.api_keys:
        lines.append(f"  clients must send one of the proxy's {len(settings.api_keys)} keys (api_keys)")
    # The page itself is open; its figures (/savings) are behind the keys, which it asks for.
    lines.append(f"  savings page: {base}/dashboard" + (" (it asks for a proxy key)" if settings.api_keys else ""))
    return lines
