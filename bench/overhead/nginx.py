"""An upstream fast enough never to be the bottleneck: nginx answering canned chat completions.

Plain nginx cannot look inside a request body, so it cannot tell `"stream": true` from false. Instead it
serves two base URLs on one port, and each proxy under test is pointed at the one its phase needs:

    {url}/json/v1/chat/completions   application/json: one chat.completion
    {url}/sse/v1/chat/completions    text/event-stream: chat.completion.chunk events, then [DONE]

Both answer with `return 200 '...'` in the rewrite phase. Static files would answer a POST with 405;
`return` has nginx read and discard the request body instead, so every byte of a 2 MB body still
crosses the socket before the connection serves its next request. client_max_body_size is raised so
such bodies are not refused with 413.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

from ..canned import completion_events, completion_json
from ..processes import Server, answers, free_port


def nginx_string(text: str) -> str:
    """`text` as a single-quoted nginx string. `$` would start a variable inside `return`'s text."""
    if "$" in text:
        raise ValueError("canned bodies must not contain '$'")
    escaped = text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    return f"'{escaped}'"


def nginx_conf(prefix: Path, port: int) -> str:
    return f"""\
# Written by bench/overhead/nginx.py for one benchmark run; deleted with its directory.
daemon off;
master_process on;
# One worker is far more than the proxies need, and leaves the second core to them and the load tool.
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/client_body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    # Agent histories of 2 MB and more must not be refused (the default limit is 1 MB). No
    # client_body_buffer_size: `return` discards the body as it reads it, so nothing is buffered.
    client_max_body_size 64m;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    server {{
        listen 127.0.0.1:{port} reuseport backlog=4096;
        location = /json/v1/chat/completions {{
            default_type application/json;
            return 200 {nginx_string(completion_json())};
        }}
        location = /sse/v1/chat/completions {{
            default_type text/event-stream;
            add_header Cache-Control no-cache;
            return 200 {nginx_string("".join(completion_events()))};
        }}
        location / {{
            return 404;
        }}
    }}
}}
"""


def find_nginx() -> str | None:
    """nginx on PATH, or in /usr/sbin where Debian puts it (not on every user's PATH)."""
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")


class NginxUpstream:
    """nginx on a free loopback port, in a temporary directory removed on exit."""

    def __init__(self) -> None:
        found = find_nginx()
        if found is None:
            raise FileNotFoundError("nginx not found: install it (Debian: apt-get install -y nginx)")
        self.binary = found
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.json_base = f"{self.url}/json/v1"
        self.sse_base = f"{self.url}/sse/v1"
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._server: Server | None = None

    def version(self) -> str:
        out = subprocess.run([self.binary, "-v"], capture_output=True, text=True, check=True)
        return out.stderr.strip().removeprefix("nginx version: ")

    def __enter__(self) -> NginxUpstream:
        self._tmp = tempfile.TemporaryDirectory(prefix="bench-nginx-")
        prefix = Path(self._tmp.name)
        conf = prefix / "nginx.conf"
        try:
            conf.write_text(nginx_conf(prefix, self.port))
            subprocess.run([self.binary, "-t", "-q", "-p", str(prefix), "-c", str(conf)], check=True)
            argv = [self.binary, "-p", str(prefix), "-c", str(conf)]
            ready = answers(f"{self.json_base}/chat/completions", b"{}", timeout=2)
            self._server = Server("nginx", argv, prefix / "stdout.log", ready, start_timeout=15)
            self._server.__enter__()
        except BaseException:
            self._tmp.cleanup()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self._server is not None:
                self._server.stop()
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()
