"""Schemathesis against the proxy's own /openapi.json: requests generated from the documented schema, valid
and invalid, sent over loopback to a proxy forwarding to the stand-in upstream. Bounded: a fixed number of
examples per route, and every request has a timeout, so a hang fails instead of stalling the run.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import BaseSchema, Case, GenerationMode
from schemathesis.checks import not_a_server_error
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
EXAMPLES = 160  # per generation mode, the four routes together
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
    proxy_schema: BaseSchema, mode: GenerationMode
) -> None:
    @given(case=proxy_schema.as_strategy(mode))
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    def request_conforms(case: Case) -> None:
        response = case.call(timeout=30)  # a hang is a failure, not a stuck test run
        case.validate_response(response, checks=CHECKS)

    request_conforms()


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
