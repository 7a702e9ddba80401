"""From a request body to the body that goes upstream: the chain picked and run (compactor), where the work runs
(lanes), and what the result does to the provider's prompt cache (prefix).
"""
