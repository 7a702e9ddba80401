"""What a hostile model's answer and a stream that never ends cost the proxy: `python -m bench.hostile`
(bench/hostile/cli.py).
"""
