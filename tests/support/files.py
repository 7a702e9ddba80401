"""Files as a test compares them before and after."""

from __future__ import annotations

import hashlib
from pathlib import Path


def digests(root: Path) -> dict[str, str]:
    """Every file under root by its SHA-256: a file changed, added or removed shows."""
    files = (p for p in root.rglob("*") if p.is_file())
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
