"""HTTP routes. Each stays thin: parse, compact, forward."""
