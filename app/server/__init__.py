"""The process and its sockets: the command line, uvicorn's server with a drain on shutdown, worker processes,
the client connections' limits, logging and readiness.
"""
