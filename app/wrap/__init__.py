"""`compaction-proxy wrap`: a coding agent run through the proxy in one command (cli), with a summary at its end."""
