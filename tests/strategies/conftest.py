from __future__ import annotations

import pytest

from strategies import Context, Encodings, TokenCounter
from tests.strategies.harness import RecordingContext


@pytest.fixture(scope="session")
def shared_encodings() -> Encodings:
    """The encodings for the session: loading one takes about 0.3 s."""
    return Encodings()


@pytest.fixture(scope="session")
def counter(shared_encodings: Encodings) -> TokenCounter:
    """One real counter for the session."""
    return TokenCounter(shared_encodings)


@pytest.fixture
def ctx(counter: TokenCounter) -> Context:
    return RecordingContext(model="gpt-4o", tokens=counter)
