"""What a request can make the proxy do: `python -m bench.complexity` (bench/complexity/cli.py)."""
