"""(a) tau-bench airline: 200 real conversations of a gpt-4o customer-service agent with tool calls.

The project ships its own copy (bench/compaction/data/tau-bench-airline.json.gz, MIT: its LICENSE beside it), so the
benchmark and its tests run in a clone that has nothing beside it. The data has no tool definitions, so requests
of this corpus carry none and their tool-definition tokens are not counted.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from . import Conversation, Corpus

DATA = Path(__file__).resolve().parents[1] / "data/tau-bench-airline.json.gz"


def load(limit: int | None = None, path: Path = DATA) -> Corpus:
    key, title = "tau", "tau-bench airline (real)"
    if not path.exists():
        return Corpus(key, title, "", skipped=f"{path} not found")
    entries = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
    picked = entries if limit is None else entries[:limit]
    conversations = [Conversation(f"tau-{n}-task{entry['task_id']}", entry["traj"]) for n, entry in enumerate(picked)]
    sampled = "all" if limit is None or limit >= len(entries) else f"the first {len(picked)} of"
    description = (
        f"{sampled} {len(entries)} real conversations of a gpt-4o airline agent (sierra-research/tau-bench, MIT), "
        "tool calls and results as recorded; no tool definitions in the data"
    )
    return Corpus(key, title, description, conversations)
