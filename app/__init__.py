"""The HTTP layer: settings, routes, the upstream client and error handling."""

from .main import ConfigError, create_app
from .settings import Settings

__all__ = ["ConfigError", "Settings", "create_app"]
