"""The SSE splitter (app.upstream.sse): the events of any stream, however its chunks fall, and an event that never
ends refused at the limit rather than held.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.upstream.sse import EVENT_ENDS, EventSplitter, EventTooLarge

_ENDS = re.compile(b"|".join(re.escape(end) for end in EVENT_ENDS))


def reference(stream: bytes) -> list[bytes]:
    """The events by the definition: split at the first end of any kind, blank ones dropped."""
    parts = _ENDS.split(stream)
    return [p for p in parts if p.strip()]


def split(stream: bytes, cuts: list[int], limit: int = 1 << 30) -> list[bytes]:
    splitter = EventSplitter(limit)
    events: list[bytes] = []
    previous = 0
    for cut in sorted({c % (len(stream) + 1) for c in cuts}) + [len(stream)]:
        events += splitter.feed(stream[previous:cut])
        previous = cut
    rest = splitter.rest()
    return events + ([rest] if rest is not None else [])


events_text = st.lists(
    st.one_of(
        st.binary(max_size=40).filter(lambda b: b"\n" not in b and b"\r" not in b),
        st.sampled_from([b"data: {}", b"event: error", b"data: [DONE]", b"\n", b"\r", b":comment"]),
    ),
    max_size=30,
)


@given(
    parts=events_text,
    ends=st.lists(st.sampled_from([*EVENT_ENDS, b"\n", b"\r\n"]), max_size=30),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=20),
)
def test_any_stream_cut_anywhere_gives_the_events_of_the_whole(
    parts: list[bytes], ends: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(p + (ends[i] if i < len(ends) else b"") for i, p in enumerate(parts))
    assert split(stream, cuts) == reference(stream)


@pytest.mark.parametrize("end", EVENT_ENDS)
def test_an_end_split_across_chunks_is_found(end: bytes) -> None:
    stream = b"data: 1" + end + b"data: 2" + end
    for cut in range(len(stream) + 1):
        assert split(stream, [cut]) == [b"data: 1", b"data: 2"]


def test_an_event_that_never_ends_is_refused_at_the_limit_not_held() -> None:
    splitter = EventSplitter(limit=1 << 20)
    chunk = b"x" * 65536
    fed = 0
    with pytest.raises(EventTooLarge):
        while fed < 30 << 20:  # the finding's 30 MB event, in 64 KB chunks
            splitter.feed(chunk)
            fed += len(chunk)
    assert fed <= (1 << 20) + len(chunk)
