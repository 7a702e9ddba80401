"""(e) SWE-agent runs: real coding-agent sessions on GitHub issues, in OpenAI's tool-calling form.

Written once by scripts/convert_swe_traj.py from SWE-agent's .traj files (its docstring says how each shape is
read). The project does not ship a sample yet: one goes into bench/compaction/data/ with its licence beside it,
as tau-bench's did (docs/benchmarks.md, Corpora, says where the data comes from); until then the corpus is
skipped, or read from the file `--swe-data` names. The sessions carry no tool definitions, so, as with tau-bench,
none are counted.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

from . import Conversation, Corpus

DATA = Path(__file__).resolve().parents[1] / "data/swe-agent-trajectories.json.gz"
CONVERT = "python scripts/convert_swe_traj.py"


def load(limit: int | None = None, path: Path = DATA) -> Corpus:
    key = "swe"
    if not path.exists():
        skipped = f"{path} not found (write one with {CONVERT}, or pass --swe-data)"
        return Corpus(key, "SWE-agent runs (real)", "", skipped=skipped)
    entries = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
    picked = entries if limit is None else entries[:limit]
    # Named after the agents the file holds (mini-swe-agent's runs are no SWE-agent's), in every table.
    title = f"{' / '.join(sorted({e['agent'] for e in picked})) or 'SWE-agent'} runs (real)"
    conversations = [Conversation(f"swe-{n}-{entry['id']}", entry["messages"]) for n, entry in enumerate(picked)]
    sampled = "all" if limit is None or limit >= len(entries) else f"the first {len(picked)} of"
    models = ", ".join(f"{model} {count}" for model, count in Counter(e["model"] for e in picked).most_common())
    repos = sorted({e["source"]["repo"] for e in picked if e["source"].get("repo")})
    converted = sum(1 for e in picked if e.get("converted"))
    description = (
        f"{sampled} {len(entries)} recorded sessions of {', '.join(sorted({e['agent'] for e in picked}))} "
        f"({models}; from {', '.join(repos) or path.name}), {converted} of them text actions converted to bash "
        "calls; no tool definitions in the data"
    )
    return Corpus(key, title, description, conversations)
