"""The notes strategy over a long trip-planning chat: `python -m bench.notes` (bench/notes/cli.py)."""
