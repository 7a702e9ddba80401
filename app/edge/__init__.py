"""What every request passes on its way in and out, whatever its route: the body's limits, the request id, metrics,
the proxy's own errors and which headers cross the proxy.
"""
