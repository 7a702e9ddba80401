"""The HTTP layer: settings, routes, the upstream client and error handling."""

from app.main import ConfigError, create_app
from app.settings import Settings

__all__ = ["ConfigError", "Settings", "create_app"]
