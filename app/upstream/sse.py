"""Server-sent events as they come off the wire: where one ends (a blank line, by any of the three line endings),
and a stream cut into its events in time linear in its bytes, however its chunks fall.
"""

from __future__ import annotations

EVENT_ENDS = (b"\n\n", b"\r\n\r\n", b"\r\r")  # what ends an SSE event, by line ending
_LONGEST_END = max(len(end) for end in EVENT_ENDS)


class EventTooLarge(Exception):
    """An event longer than the splitter's limit: it is not held to be parsed."""


class EventSplitter:
    """Feed it chunks; it gives back the whole events in them (each without the blank line that ends it).

    Each byte is searched once: a chunk is searched from where the last search stopped (less an end's length, for an
    end split across chunks), and the events are cut out by offset, the buffer shortened once per chunk.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit  # bytes an unfinished event may hold
        self.buffer = bytearray()
        self.searched = 0  # the buffer before this holds no event end

    def feed(self, chunk: bytes) -> list[bytes]:
        buffer = self.buffer
        buffer += chunk
        begin = max(0, self.searched - _LONGEST_END + 1)
        # Where each kind of end next occurs (-1: nowhere in the buffer); each one's search only moves forward.
        nexts = {end: buffer.find(end, begin) for end in EVENT_ENDS}
        events: list[bytes] = []
        start = 0
        while True:
            for end, at in nexts.items():
                if 0 <= at < start:
                    nexts[end] = buffer.find(end, start)
            found = [(at, end) for end, at in nexts.items() if at >= 0]
            if not found:
                break
            at, end = min(found)
            event = bytes(buffer[start:at])
            if event.strip():
                events.append(event)
            start = at + len(end)
        del buffer[:start]
        self.searched = len(buffer)
        if len(buffer) > self.limit:
            raise EventTooLarge()
        return events

    def rest(self) -> bytes | None:
        """What the stream left after its last event end, if anything but blank."""
        rest = bytes(self.buffer)
        return rest if rest.strip() else None
