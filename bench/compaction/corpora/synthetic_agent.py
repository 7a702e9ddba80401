"""(c1) Seeded coding-agent sessions: a few user tasks, hundreds of tool calls, planted facts.

Each session reads files (and re-reads them unchanged), runs tests, greps, diffs, calls a JSON API and edits.
Eight facts are planted, in a user message or inside a tool result; some are later changed by the user; each
value is needed later by a tool call whose arguments carry it (the probe is the request that call answers).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from strategies import Message

from . import Conversation, Corpus, Probe
from . import synthetic_text as text
from .planted import Fact, check_planted, draw_value, free_slot

SYSTEM = (
    "You are a coding agent working in the payments service repository. Use the tools to read, search, test "
    "and edit code. Keep changes minimal, run the tests after every edit, and report what you changed."
)
TASKS = (
    "The CI is red on main: find out why the refund tests fail and fix it.",
    "Now make the payout batcher retry failed webhooks with backoff, and add tests.",
    "Check the currency rounding in the invoice totals; a customer reported cents off.",
    "Clean up the deprecated settle_* helpers everywhere and keep the tests green.",
    "Prepare the release: changelog, version bump, tag, and the deploy schedule.",
    "Review the ledger reconciliation job for race conditions and fix what you find.",
)
# label, kind, the config key it appears under, and the call that needs it (a format string over the value).
FACTS = (
    ("release ticket", "code", "release_ticket", ("run_command", {"cmd": "git tag -a v2.14.0 -m 'release {v}'"})),
    (
        "refund cap",
        "amount",
        "refund_cap",
        ("edit_file", {"path": "src/pay/limits.py", "patch": '+REFUND_CAP = "{v}"'}),
    ),
    ("reviewer", "name", "reviewer", ("run_command", {"cmd": "gh pr create --fill --reviewer '{v}'"})),
    ("deploy window", "time", "deploy_window", ("run_command", {"cmd": "deployctl schedule --at {v} --zone UTC"})),
    ("incident code", "code", "incident", ("edit_file", {"path": "CHANGELOG.md", "patch": "+- Fixes incident {v}"})),
    (
        "fee ceiling",
        "amount",
        "fee_ceiling",
        ("edit_file", {"path": "src/pay/fees.py", "patch": '+FEE_CEILING = "{v}"'}),
    ),
    ("on-call engineer", "name", "on_call", ("run_command", {"cmd": "pagerctl handover --to '{v}'"})),
    ("freeze time", "time", "freeze_at", ("run_command", {"cmd": "releasectl freeze --at {v}"})),
)
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": {p: {"type": "string"} for p in params}, "required": params},
        },
    }
    for name, description, params in (
        ("read_file", "Read a file of the repository.", ["path"]),
        ("run_tests", "Run pytest with optional arguments.", ["args"]),
        ("grep", "Search the repository for a pattern.", ["pattern"]),
        ("git_diff", "Show the diff of a path against HEAD.", ["path"]),
        ("http_get", "GET a URL of the payments API and return the JSON body.", ["url"]),
        ("edit_file", "Apply a unified-diff patch to a file.", ["path", "patch"]),
        ("run_command", "Run a shell command in the repository.", ["cmd"]),
    )
]
MIN_GAP = 20  # tool calls between a value's planting and its need, so that it is old when needed


@dataclass
class _Plan:
    calls: int
    boundaries: list[int]  # call index at which each user task starts
    user_notes: dict[int, list[tuple[Fact, int]]]  # boundary call index -> (fact, version) stated there
    tool_plants: dict[int, tuple[Fact, int]]  # call index -> fact whose value a tool result carries
    needs: dict[int, tuple[Fact, int]]  # call index -> fact whose value that call needs


def generate(sessions: int, calls: int, seed: int) -> Corpus:
    conversations = [_session(random.Random(f"{seed}-agent-{n}"), f"agent-{n}", calls) for n in range(sessions)]
    description = (
        f"{sessions} seeded coding-agent sessions (seed {seed}) of about {calls} tool calls each: file reads and "
        "re-reads, pytest logs, JSON, diffs, edits; 8 planted facts each (codes, amounts, names, times), some "
        "changed later by the user, each needed by a later tool call"
    )
    return Corpus("agent", "synthetic coding agent", description, conversations, has_probes=True)


def _plan(rng: random.Random, calls: int) -> _Plan:
    tasks = min(len(TASKS), max(2, calls // 50))
    boundaries = [0, *sorted(rng.sample(range(MIN_GAP, calls - MIN_GAP), tasks - 1))]
    plan = _Plan(calls, boundaries, {}, {}, {})
    used: set[str] = set()
    taken: set[int] = set(boundaries)
    for label, kind, _, _ in FACTS:
        changes = 1 if rng.random() < 0.4 else 0
        fact = Fact(kind, label, [draw_value(rng, kind, used) for _ in range(changes + 1)])
        fact.planted_at = [-1] * len(fact.values)
        # Where each version enters: the first at a user task or inside a tool result, changes by the user.
        if rng.random() < 0.5:
            start = rng.choice(boundaries[:-1] or boundaries)
            plan.user_notes.setdefault(start, []).append((fact, 0))
        else:
            slot = free_slot(rng, taken, 1, calls - 2 * MIN_GAP)
            if slot is None:
                continue
            start = slot
            plan.tool_plants[start] = (fact, 0)
        starts = [start]
        later = [b for b in boundaries if b >= start + 2 * MIN_GAP]
        if changes and later:
            change = rng.choice(later)
            plan.user_notes.setdefault(change, []).append((fact, 1))
            starts.append(change)
        else:
            fact.values = fact.values[:1]
            fact.planted_at = fact.planted_at[:1]
        for version, begin in enumerate(starts):
            end = starts[version + 1] if version + 1 < len(starts) else calls
            need = free_slot(rng, taken, begin + MIN_GAP, end - 1) if end - begin > MIN_GAP else None
            if need is not None:
                plan.needs[need] = (fact, version)
    return plan


class _Session:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.messages: list[Message] = [{"role": "system", "content": SYSTEM}]
        self.paths = [f"src/pay/{text.ident(rng)}.py" for _ in range(40)]
        self.read: list[str] = []
        self.next_id = 0

    def call(self, calls: list[tuple[str, dict[str, str], str]], content: str | None = None) -> int:
        """One assistant message with these (name, arguments, output) calls and their results; returns its index."""
        at = len(self.messages)
        ids = [f"call_{self.next_id + n:04d}" for n in range(len(calls))]
        self.next_id += len(calls)
        tool_calls = [
            {"id": i, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for i, (name, args, _) in zip(ids, calls, strict=True)
        ]
        self.messages.append({"role": "assistant", "content": content, "tool_calls": tool_calls})
        self.messages.extend(
            {"role": "tool", "tool_call_id": i, "content": out} for i, (_, _, out) in zip(ids, calls, strict=True)
        )
        return at

    def filler(self) -> list[tuple[str, dict[str, str], str]]:
        rng = self.rng
        kind = rng.choices(
            ("read", "reread", "tests", "grep", "diff", "http", "edit", "pair"), (25, 15, 14, 12, 9, 9, 8, 8)
        )[0]
        if kind == "reread" and self.read:
            return [self._read(rng.choice(self.read))]
        if kind in ("read", "reread"):
            return [self._read(rng.choice(self.paths))]
        if kind == "pair":  # parallel calls in one assistant message
            return [self._read(rng.choice(self.paths)), self._read(rng.choice(self.paths))]
        if kind == "tests":
            failing = [f"tests/test_{text.ident(rng)}.py::test_{text.ident(rng)}" for _ in range(rng.randint(0, 3))]
            return [("run_tests", {"args": "-x -q"}, text.test_log(rng, rng.randint(15, 70), failing))]
        if kind == "grep":
            return [("grep", {"pattern": text.ident(rng)}, text.grep_output(rng, self.paths, rng.randint(3, 25)))]
        if kind == "diff":
            path = rng.choice(self.paths)
            return [("git_diff", {"path": path}, text.git_diff(rng, path, rng.randint(1, 5)))]
        if kind == "http":
            url = f"https://api.internal/v1/{rng.choice(text.WORDS)}s?limit={rng.randint(3, 20)}"
            return [("http_get", {"url": url}, text.json_document(rng, rng.randint(3, 12)))]
        path = rng.choice(self.paths)
        patch = text.git_diff(rng, path, rng.randint(1, 3))
        return [("edit_file", {"path": path, "patch": patch}, f"patched {path}: 1 file changed")]

    def _read(self, path: str) -> tuple[str, dict[str, str], str]:
        self.read.append(path)
        size = random.Random(f"size-{path}").randint(600, 3600)
        return ("read_file", {"path": path}, text.source_file(path, size))

    def planted(self, key: str, value: str) -> tuple[str, dict[str, str], str]:
        """A tool call whose result carries the value: a config file, an API response or a test log."""
        rng = self.rng
        where = rng.choice(("config", "http", "tests"))
        if where == "config":
            lines = [f'{text.ident(rng)} = "{text.ident(rng)}"' for _ in range(rng.randint(20, 60))]
            lines.insert(rng.randrange(len(lines)), f'{key} = "{value}"')
            return ("read_file", {"path": "config/release.toml"}, "\n".join(lines))
        if where == "http":
            body = text.json_document(rng, rng.randint(3, 15), {key: value})
            return ("http_get", {"url": "https://api.internal/v1/release/current"}, body)
        log = text.test_log(rng, rng.randint(20, 80), [], extra=f"NOTE {key}={value}")
        return ("run_tests", {"args": "-q tests/test_release.py"}, log)


def _session(rng: random.Random, name: str, calls: int) -> Conversation:
    plan = _plan(rng, calls)
    keys = {label: key for label, _, key, _ in FACTS}
    needs = {label: need for label, _, _, need in FACTS}
    s = _Session(rng)
    for k in range(calls):
        if k in plan.boundaries:
            task = plan.boundaries.index(k)
            if k:
                s.messages.append({"role": "assistant", "content": f"Done. {text.remark(rng)} {text.remark(rng)}"})
            notes = []
            for fact, version in plan.user_notes.get(k, []):
                fact.planted_at[version] = len(s.messages)
                verb = "is now" if version else "is"
                notes.append(
                    f"{'Change of plan: the' if version else 'Note: the'} {fact.label} {verb} {fact.values[version]}."
                )
            s.messages.append({"role": "user", "content": " ".join([TASKS[task], *notes])})
        if k in plan.needs:
            fact, version = plan.needs[k]
            tool, template = needs[fact.label]
            args = {p: v.format(v=fact.values[version]) for p, v in template.items()}
            at = s.call([(tool, args, "ok")], f"Using the {fact.label} now.")
            fact.needs.append((at, version))
        elif k in plan.tool_plants:
            fact, version = plan.tool_plants[k]
            fact.planted_at[version] = s.call([s.planted(keys[fact.label], fact.values[version])]) + 1
        else:
            s.call(s.filler(), text.remark(rng) if rng.random() < 0.3 else None)
    s.messages.append({"role": "assistant", "content": f"All tasks done. {text.remark(rng)} {text.remark(rng)}"})
    facts = [fact for fact, _ in plan.needs.values()]
    check_planted(s.messages, facts)
    probes: list[Probe] = sorted({p for f in facts for p in f.probes()}, key=lambda p: p.answer_at)
    return Conversation(name, s.messages, TOOLS, tuple(probes))
