from __future__ import annotations

import pytest

from strategies import Context, TokenCounter
from tests.strategies.harness import RecordingContext


@pytest.fixture(scope="session")
def counter() -> TokenCounter:
    """One real counter for the session: loading an encoding takes about 0.3 s."""
    return TokenCounter()


@pytest.fixture
def ctx(counter: TokenCounter) -> Context:
    return RecordingContext(model="gpt-4o", tokens=counter)
