"""sqlite:///path: a file on this host. Survives restarts and is shared by the processes on the host that
open the same file (the workers of one proxy), with the fold lock in a table of its own.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.cache.base import CacheError

# The table and column are named as when the cache held notes alone: kept, so a file written before still reads.
SCHEMA = """
CREATE TABLE IF NOT EXISTS notes (key TEXT PRIMARY KEY, notes TEXT NOT NULL, expires REAL NOT NULL);
CREATE INDEX IF NOT EXISTS notes_expires ON notes (expires);
CREATE TABLE IF NOT EXISTS locks (key TEXT PRIMARY KEY, token TEXT NOT NULL, expires REAL NOT NULL);
"""
BUSY_TIMEOUT_MS = 5000


class Connections:
    """One connection per thread (sqlite3 connections must not be shared between threads at once), all kept so that
    close() can close them; the file and its directory made, and `schema` run, when opened.
    """

    def __init__(self, path: Path, schema: str) -> None:
        self.path = path
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.get().executescript(schema)
        except (OSError, sqlite3.Error) as exc:
            raise CacheError(f"cannot open the cache {path}: {exc}") from None

    def get(self) -> sqlite3.Connection:
        """This thread's connection."""
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            # Autocommit (isolation_level=None): every statement commits at once unless a BEGIN says otherwise.
            connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            connection.execute("PRAGMA journal_mode = WAL")  # readers do not wait for a writer
            self._local.connection = connection
            with self._lock:
                self._connections.append(connection)
        return connection

    @contextmanager
    def writing(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection in a write transaction, begun at once (BEGIN IMMEDIATE: one writer at a time,
        across processes, so a check and a write in it are one step), committed or rolled back; CacheError for any
        failure of SQLite's.
        """
        try:
            db = self.get()
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except sqlite3.Error:
                db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise CacheError(str(exc)) from None

    def close(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()


class SqliteBackend:
    """Wall-clock expiry: other processes read the same rows."""

    def __init__(self, path: Path, ttl: float) -> None:
        self.path = path
        self.ttl = ttl
        self._connections = Connections(path, SCHEMA)
        self._connection = self._connections.get

    def get(self, key: str) -> str | None:
        now = time.time()
        try:
            db = self._connection()
            row = db.execute("SELECT notes FROM notes WHERE key = ? AND expires > ?", (key, now)).fetchone()
            if row is None:
                return None
            db.execute("UPDATE notes SET expires = ? WHERE key = ?", (now + self.ttl, key))
        except sqlite3.Error as exc:
            raise CacheError(str(exc)) from None
        value: str = row[0]
        return value

    def put(self, key: str, value: str) -> None:
        now = time.time()
        try:
            db = self._connection()
            db.execute("INSERT OR REPLACE INTO notes VALUES (?, ?, ?)", (key, value, now + self.ttl))
            db.execute("DELETE FROM notes WHERE expires <= ?", (now,))
        except sqlite3.Error as exc:
            raise CacheError(str(exc)) from None

    def acquire(self, key: str, token: str, seconds: float) -> bool:
        now = time.time()
        with self._connections.writing() as db:
            db.execute("DELETE FROM locks WHERE key = ? AND expires <= ?", (key, now))
            taken = db.execute("INSERT OR IGNORE INTO locks VALUES (?, ?, ?)", (key, token, now + seconds)).rowcount
        return taken == 1

    def release(self, key: str, token: str) -> None:
        try:
            self._connection().execute("DELETE FROM locks WHERE key = ? AND token = ?", (key, token))
        except sqlite3.Error as exc:
            raise CacheError(str(exc)) from None

    def close(self) -> None:
        self._connections.close()
