"""What compaction saves, what the model can still see, and what it does to the prompt cache: `python -m
bench.compaction` (bench/compaction/cli.py) replays every request of the corpora (corpora/) through each chain
(chains.py, replay.py), models the provider's prompt cache (prompt_cache.py) and what stays visible
(visibility.py), chooses the default chain (default_choice.py), optionally asks a model (judge.py), and writes
the tables (report/) and charts (charts.py).
"""
