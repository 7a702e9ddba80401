"""Many mixed requests through the real proxy process: `python -m bench.soak` (bench/soak/cli.py)."""
