"""sqlite:///path: the ledger in the cache's file, in tables of its own. Survives a restart; the processes of one
host that open the same file (the workers of one proxy) add up in it, each increment an UPSERT.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from app.cache import CacheError
from app.cache.sqlite import Connections
from app.savings.tally import Tally

SCHEMA = """
CREATE TABLE IF NOT EXISTS savings_totals (
    wire TEXT NOT NULL, model TEXT NOT NULL, field TEXT NOT NULL, value INTEGER NOT NULL,
    PRIMARY KEY (wire, model, field)
);
CREATE TABLE IF NOT EXISTS savings_series (
    minute INTEGER NOT NULL, field TEXT NOT NULL, value INTEGER NOT NULL, PRIMARY KEY (minute, field)
);
CREATE TABLE IF NOT EXISTS savings_windows (
    wire TEXT NOT NULL, model TEXT NOT NULL, context_window INTEGER NOT NULL, PRIMARY KEY (wire, model)
);
CREATE TABLE IF NOT EXISTS savings_models (model TEXT PRIMARY KEY);
"""


class SqliteStore:
    name = "sqlite"

    def __init__(self, path: Path) -> None:
        self._connections = Connections(path, SCHEMA)

    def admit(self, model: str, limit: int) -> bool:
        with self._connections.writing() as db:  # the count and the insert as one step, against other processes
            db.execute(
                "INSERT OR IGNORE INTO savings_models SELECT ? WHERE (SELECT count(*) FROM savings_models) < ?",
                (model, limit),
            )
            found = db.execute("SELECT 1 FROM savings_models WHERE model = ?", (model,)).fetchone()
        return found is not None

    def admitted(self) -> set[str]:
        try:
            return {row[0] for row in self._connections.get().execute("SELECT model FROM savings_models")}
        except sqlite3.Error as exc:
            raise CacheError(str(exc)) from None

    def add(self, tally: Tally, oldest_minute: int) -> None:
        with self._connections.writing() as db:
            db.executemany(
                "INSERT INTO savings_totals VALUES (?, ?, ?, ?) "
                "ON CONFLICT (wire, model, field) DO UPDATE SET value = value + excluded.value",
                [(*key, count) for key, count in tally.totals.items()],
            )
            db.executemany(
                "INSERT INTO savings_series VALUES (?, ?, ?) "
                "ON CONFLICT (minute, field) DO UPDATE SET value = value + excluded.value",
                [(*key, count) for key, count in tally.series.items() if key[0] >= oldest_minute],
            )
            db.executemany(
                "INSERT INTO savings_windows VALUES (?, ?, ?) ON CONFLICT (wire, model) "
                "DO UPDATE SET context_window = min(context_window, excluded.context_window)",
                [(*key, window) for key, window in tally.windows.items()],
            )
            db.execute("DELETE FROM savings_series WHERE minute < ?", (oldest_minute,))

    def read(self, oldest_minute: int) -> Tally:
        try:
            db = self._connections.get()
            totals = db.execute("SELECT wire, model, field, value FROM savings_totals").fetchall()
            series = db.execute(
                "SELECT minute, field, value FROM savings_series WHERE minute >= ?", (oldest_minute,)
            ).fetchall()
            windows = db.execute("SELECT wire, model, context_window FROM savings_windows").fetchall()
        except sqlite3.Error as exc:
            raise CacheError(str(exc)) from None
        return Tally(
            {(w, m, f): v for w, m, f, v in totals},
            {(minute, f): v for minute, f, v in series},
            {(w, m): v for w, m, v in windows},
        )

    def close(self) -> None:
        self._connections.close()
