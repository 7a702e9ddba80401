"""(a) tau-bench airline: 200 real conversations of a gpt-4o customer-service agent with tool calls.

The data lives in the shared folder beside the project (never copied in); it has no tool definitions, so
requests of this corpus carry none and their tool-definition tokens are not counted.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import Conversation, Corpus

DATA = Path(__file__).resolve().parents[2].parent / "shared/data/tau-bench-airline.json"


def load(limit: int | None = None, path: Path = DATA) -> Corpus:
    key, title = "tau", "tau-bench airline (real)"
    if not path.exists():
        return Corpus(key, title, "", skipped=f"{path} not found (the shared data folder beside the project)")
    entries = json.loads(path.read_text())
    picked = entries if limit is None else entries[:limit]
    conversations = [Conversation(f"tau-{n}-task{entry['task_id']}", entry["traj"]) for n, entry in enumerate(picked)]
    sampled = "all" if limit is None or limit >= len(entries) else f"the first {len(picked)} of"
    description = (
        f"{sampled} {len(entries)} real conversations of a gpt-4o airline agent (sierra-research/tau-bench, MIT), "
        "tool calls and results as recorded; no tool definitions in the data"
    )
    return Corpus(key, title, description, conversations)
