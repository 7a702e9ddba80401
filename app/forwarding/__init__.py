"""One forwarded request, from its compacted body to the answer relayed: fitted to the model's window, retried
once on a context-length refusal, handed to the expand loop when the tool was offered (forwarding); reading an
upstream's refusal without losing it (refusals).
"""

from app.forwarding.forwarding import Forwarding, client_gone

__all__ = ["Forwarding", "client_gone"]
