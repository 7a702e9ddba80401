"""A strategy that holds its worker thread until released, checking its deadline as real strategies do."""

from __future__ import annotations

import threading
import time

from strategies import BUILTINS, Applied, Context, Message, Params, Registry, Strategy
from strategies.context import CompactionStopped


class HoldParams(Params):
    pass


class Holding:
    """Registry with a `hold` strategy; entered counts the compactions that started, stopped records the
    reason of each one that a checkpoint stopped.
    """

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)
        self.stopped: list[str] = []
        holding = self

        class Hold(Strategy[HoldParams]):
            name = "hold"
            params_model = HoldParams
            summary = "Holds the compaction until the test releases it."

            def apply(self, messages: list[Message], ctx: Context) -> Applied:
                holding.entered.release()
                try:
                    while not holding.release.wait(0.002):
                        ctx.checkpoint()
                except CompactionStopped as exc:
                    holding.stopped.append(exc.reason)
                    raise
                return Applied(messages[:-1] + [{**messages[-1], "content": "held"}] if messages else messages)

        self.registry = Registry([*BUILTINS, Hold])

    def wait_entered(self, timeout: float = 10) -> None:
        assert self.entered.acquire(timeout=timeout), "no compaction started"

    def wait_stopped(self, count: int = 1, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while len(self.stopped) < count:
            assert time.monotonic() < deadline, "the compaction was not stopped"
            time.sleep(0.01)
