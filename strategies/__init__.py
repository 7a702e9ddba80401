"""Pure message transforms: messages in, new messages out. Never imports the HTTP layer."""

from .base import Applied, Params, Strategy
from .chain import Chain, ChainResult, StepStats
from .chain_syntax import ChainSyntaxError, StepSpec, format_chain, parse_chain
from .context import Context
from .encodings import Encodings
from .memo import Memo
from .messages import Message
from .models import ModelLimits, ModelTable
from .notes_io import NotesCache, NotesUnavailable, Summariser
from .registry import BUILTINS, ENTRY_POINT_GROUP, Registry, StrategyError
from .tokens import TokenCounter, encoding_for_model
from .unavailable import Unavailable

__all__ = [
    "BUILTINS",
    "Applied",
    "ENTRY_POINT_GROUP",
    "Chain",
    "ChainResult",
    "ChainSyntaxError",
    "Context",
    "Encodings",
    "Memo",
    "Message",
    "ModelLimits",
    "ModelTable",
    "NotesCache",
    "NotesUnavailable",
    "Params",
    "Registry",
    "StepSpec",
    "StepStats",
    "Strategy",
    "StrategyError",
    "Summariser",
    "TokenCounter",
    "Unavailable",
    "encoding_for_model",
    "format_chain",
    "parse_chain",
]
