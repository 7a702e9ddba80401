"""Schemathesis against the proxy's own /openapi.json: requests generated from the documented schema, valid
and invalid, sent over loopback to a proxy forwarding to the stand-in upstream. Bounded: a fixed number of
examples per route, and every request has a timeout, so a hang fails instead of stalling the run.

A failure reports the request that caused it (method, path, headers with any key redacted, the body byte for
byte), the answer, and how to reproduce it: the run's seed, hypothesis' @reproduce_failure blob, a curl line.
FUZZ_SEED=<seed> replays a run; FUZZ_EXAMPLES=<n> generates more examples per mode (a longer hunt).
"""

from __future__ import annotations

import base64
import os
import random
import shlex
from collections.abc import Iterator

import hypothesis
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, reproduce_failure, seed, settings
from schemathesis import BaseSchema, Case, GenerationMode, Response
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.app.conftest import ProxyFactory
from tests.support.servers import LoopbackServer

# Small enough that some generated bodies pass it, so 413s are generated and checked too.
BODY_LIMIT = 4096
FUZZED = r"^/(compact|v1/chat/completions|v1/responses|compact/responses|v1/messages|compact/messages)$"
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "160"))  # per generation mode, the routes together
# A fresh seed each run, as hypothesis would pick; reported with a failure, so FUZZ_SEED replays that run.
SEED = int(os.environ.get("FUZZ_SEED") or random.SystemRandom().randrange(2**32))
BLOB = os.environ.get("FUZZ_BLOB")  # one failing example alone: the blob of the @reproduce_failure line it printed
# Header values never printed: credentials, whatever their header is called.
SECRET_HEADERS = ("authorization", "cookie", "key", "token", "secret", "password", "session")
# Which statuses may happen is the schema's business (status_code_conformance); these look at what came back.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def fuzzed_proxy(start_proxy: ProxyFactory) -> Iterator[LoopbackServer]:
    with start_proxy(max_body_bytes=BODY_LIMIT) as server:
        yield server


@pytest.fixture(scope="module")
def proxy_schema(fuzzed_proxy: LoopbackServer) -> BaseSchema:
    return schemathesis.openapi.from_url(f"{fuzzed_proxy.url}/openapi.json").include(path_regex=FUZZED)


# Not schemathesis.pytest.from_fixture + @schema.parametrize(): with pytest 9 that fails before running anything
# ("'Function' object has no attribute '_nodeid'", schemathesis 4.32.5). The strategy API needs no pytest plugin.
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["valid", "invalid"])
def test_generated_requests_never_get_a_server_error_and_answers_match_the_schema(
    proxy_schema: BaseSchema, mode: GenerationMode, request: pytest.FixtureRequest
) -> None:
    @seed(SEED)
    @given(case=proxy_schema.as_strategy(mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
        phases=[phase for phase in Phase if phase is not Phase.explain],  # it would list the report's own lines
    )
    def request_conforms(case: Case) -> None:
        response = None
        try:
            response = case.call(timeout=30)  # a hang is a failure, not a stuck test run
            case.validate_response(response, checks=CHECKS)
        except FailureGroup as failed:
            # A BaseException, which hypothesis neither shrinks nor reports (no example, no blob): an AssertionError
            # it does. Its curl line is left out: it shows every key with "token" in it (max_tokens) as [Filtered].
            checks = failed.message.split("\n\nReproduce with:")[0]
            raise AssertionError(f"{checks}\n\n{failure_report(case, response, request.node.nodeid)}") from None
        except Exception as error:  # no answer: a timeout, a connection refused
            raise AssertionError(f"{error!r}\n\n{failure_report(case, response, request.node.nodeid)}") from error

    if BLOB:
        request_conforms = reproduce_failure(hypothesis.__version__, BLOB.encode())(request_conforms)
    request_conforms()


def failure_report(case: Case, response: Response | None, nodeid: str) -> str:
    """The request as it was sent (the one `response` answers; built from the case when nothing came back), the
    answer, and three ways to send it again.
    """
    sent = response.request if response is not None else _prepared(case)
    headers = {name: _shown(name, value) for name, value in sent.headers.items()}
    body = sent.body.encode() if isinstance(sent.body, str) else sent.body or b""
    try:
        text = body.decode()
        data = f"--data-binary {shlex.quote(text)}"
    except UnicodeDecodeError:
        text = f"(not UTF-8; base64:) {base64.b64encode(body).decode()}"
        data = f"--data-binary @<(echo {base64.b64encode(body).decode()} | base64 -d)"
    path = sent.path_url
    options = [
        f"-H {shlex.quote(f'{name}: {value}')}" for name, value in headers.items() if name.lower() not in CURLS_OWN
    ]
    curl = f'curl -sS -X {sent.method} "${{PROXY:-http://127.0.0.1:8080}}"{shlex.quote(path)} {" ".join(options)}'
    answer = "none (the request itself failed)"
    if response is not None:
        answer = f"{response.status_code} {response.content[:2000].decode(errors='replace')}"
    return "\n".join(
        [
            "The request that failed:",
            f"    {sent.method} {path}",
            *(f"    {name}: {value}" for name, value in headers.items()),
            "",
            f"    {text}",
            "",
            f"The proxy answered: {answer}",
            "",
            "To reproduce it: the same run (its seed and examples),",
            f"    FUZZ_SEED={SEED} FUZZ_EXAMPLES={EXAMPLES} .venv/bin/pytest -p no:cacheprovider {shlex.quote(nodeid)}",
            "or this example alone, with the blob of the @reproduce_failure line below (b'<blob>'),",
            f"    FUZZ_BLOB='<blob>' .venv/bin/pytest -p no:cacheprovider {shlex.quote(nodeid)}",
            "or this request, to a proxy you run (PROXY=its URL; the test's forwards to tests.support.upstream):",
            f"    {curl} {data}",
        ]
    )


# Headers a curl line leaves to curl itself.
CURLS_OWN = ("content-length", "connection", "accept-encoding")


def _shown(name: str, value: str | bytes) -> str:
    if any(marker in name.lower() for marker in SECRET_HEADERS):
        return "<redacted>"
    return value.decode("latin-1") if isinstance(value, bytes) else value


def _prepared(case: Case) -> requests.PreparedRequest:
    """The request case.call sends, for a failure before any answer (a timeout, a refused connection)."""
    kwargs = case.as_transport_kwargs()
    fields = ("method", "url", "headers", "params", "cookies", "json", "data")
    return requests.Request(**{k: v for k, v in kwargs.items() if k in fields}).prepare()


def test_the_schema_covers_both_routes_and_documents_the_errors(proxy_schema: BaseSchema) -> None:
    document = proxy_schema.raw_schema
    for path in ("/compact", "/v1/chat/completions"):
        operation = document["paths"][path]["post"]
        assert operation["requestBody"]["content"]["application/json"]["schema"]["required"] == ["messages"]
        statuses = set(operation["responses"])
        assert {"200", "400", "401", "413"} <= statuses, (path, statuses)
    assert {"502", "504"} <= set(document["paths"]["/v1/chat/completions"]["post"]["responses"])
    for path in ("/compact/responses", "/v1/responses"):
        operation = document["paths"][path]["post"]
        assert "input" in operation["requestBody"]["content"]["application/json"]["schema"]["properties"]
        assert {"200", "400", "401", "413"} <= set(operation["responses"]), path


def test_a_failure_reports_the_request_as_sent_without_its_keys(
    proxy_schema: BaseSchema, fuzzed_proxy: LoopbackServer
) -> None:
    body = {"messages": [{"role": "user", "content": "it's"}], "max_tokens": 5}
    headers = {"Authorization": "Bearer sk-secret", "X-Api-Key": "sk-other", "X-Compaction-Strategies": "none"}
    case = proxy_schema["/compact"]["POST"].Case(body=body, headers=headers)
    answered = failure_report(case, case.call(timeout=30), "tests/app/routes/test_openapi.py::t[invalid]")
    unanswered = failure_report(case, None, "tests/app/routes/test_openapi.py::t[invalid]")  # a timeout, say
    for report in (answered, unanswered):
        assert "sk-secret" not in report and "sk-other" not in report
        assert "Authorization: <redacted>" in report and "X-Api-Key: <redacted>" in report
        assert "    POST /compact\n" in report and "X-Compaction-Strategies: none" in report
        assert '{"messages": [{"role": "user", "content": "it\'s"}], "max_tokens": 5}' in report  # as sent, keys too
        assert f"FUZZ_SEED={SEED} FUZZ_EXAMPLES={EXAMPLES} " in report and "FUZZ_BLOB=" in report
        assert """--data-binary '{"messages": [{"role": "user", "content": "it'"'"'s"}], "max_tokens": 5}'""" in report
    assert "The proxy answered: 200 {" in answered and "The proxy answered: none" in unanswered
