"""Which async HTTP client the proxy sends upstream with: each candidate's cost per request, measured alone."""
