"""The upstream side: one pool of connections (transport, client), answers relayed back (relay), the Responses
WebSocket relay, and what is known of each model behind the upstream (models).
"""
