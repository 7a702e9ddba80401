"""Benchmarks: scripts that measure and print. Never part of the tests' assertions.

One package per benchmark, each run as `python -m bench.<name>`: compaction (what compaction saves, net of the
prompt cache), overhead (what the proxy costs on the wire), notes (the notes strategy over a long chat), soak
(many requests through one proxy process), complexity (work per request on an attacker's shapes), hostile (a model
flooding the expand tool, an SSE event that never ends) and speed (the per-request CPU path on a big history).
Beside them, what more than one of them needs: processes (starting, probing and stopping servers, reading /proc),
canned (the chat completion the upstreams answer), agent_history (a coding agent's request of a given size),
compactor (the proxy's Compactor without a server) and docs_block (the generated blocks in the docs).
"""

from pathlib import Path

# The checkout bench runs from (it is not installed): `python -m app` and `python -m bench...` children start
# here, so they run this tree's code, and git describes it.
CHECKOUT = Path(__file__).resolve().parents[1]
