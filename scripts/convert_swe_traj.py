"""Convert SWE-agent and mini-swe-agent trajectories into the compaction benchmark's real-trace format, once.

    python scripts/convert_swe_traj.py --git-dir DIR [--rev REV] [--repo OWNER/NAME] [--limit N] --out FILE PATH...
    python scripts/convert_swe_traj.py --out FILE some/run/*.traj          # files on disk

The sample measured in docs/benchmarks.md (19 sessions of SWE-agent's own repository, MIT), from a mirror of it:

    python scripts/convert_swe_traj.py --git-dir MIRROR --rev 0772c99 --repo princeton-nlp/SWE-agent \
        --out swe-agent-trajectories.json.gz trajectories tests/test_data/trajectories

The longer sessions of docs/benchmarks.md (500 runs of mini-swe-agent 1.15.0 with Gemini 3 Pro, MIT), likewise:

    python scripts/convert_swe_traj.py --git-dir MIRROR --rev d12a71a --repo gruckion/mini-swe-agent \
        --out mini-swe-agent-gemini3.json.gz swebench_results/20251118_gemini-3-pro-74pct/trajs

Each PATH is a .traj (SWE-agent) or .traj.json (mini-swe-agent) file, or a folder searched for them (in the git
tree at REV with --git-dir). A trajectory holds the messages the agent sent the model (SWE-agent's `history`,
mini-swe-agent's `messages`). Two shapes are read:

- function calling (SWE-agent 1.x): assistant messages carry `tool_calls`, tool messages `tool_call_ids`. Kept as
  recorded (a call list stored as a Python repr string is parsed), ids and arguments unchanged.
- text actions (SWE-agent 0.x, mini-swe-agent): the assistant writes its thought and one command in a fenced
  block, and the next user message is the command's output. Converted to tool calling: the thought stays the
  assistant's text, the command becomes one call of a `bash` tool ({"command": ...}) and the output its tool
  result. No text is dropped or rewritten except the fence around the command. Such sessions are marked
  `"converted": "text actions"`.

Demonstrations a person wrote (run folders named human or human_thought) are left out, and so are sessions
whose messages break OpenAI's pairing rules after conversion or whose call arguments are not JSON (counted on
stderr); identical histories are kept once. The output is gzipped JSON: a list of {"id", "agent", "model",
"converted", "source": {"repo", "commit", "path"}, "messages"}, read by bench/compaction/corpora/swe.py.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from strategies.invariants import pairing_problems  # noqa: E402

# SWE-agent's demonstrations whose thoughts a person wrote (the run folder names the model).
HUMAN = {"human", "human_thought"}
TRAJECTORY = (".traj", ".traj.json")  # SWE-agent's, mini-swe-agent's
# The last fenced block of a text-action reply is its command (SWE-agent's ThoughtActionParser).
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)


def text(content: Any) -> str:
    """A message's content as one string: text parts joined, anything else (images) left out."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "" if content is None else str(content)


def listed(value: Any) -> list[Any]:
    """tool_calls and tool_call_ids are lists, or their Python repr in some SWE-agent versions."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return []
    return value if isinstance(value, list) else []


def call_of(raw: dict[str, Any]) -> dict[str, Any]:
    function = raw.get("function") or {}
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments if arguments is not None else {})
    return {"id": raw["id"], "type": "function", "function": {"name": function.get("name", ""), "arguments": arguments}}


def function_calling(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for entry in history:
        role = entry.get("role")
        if role == "tool":
            ids = listed(entry.get("tool_call_ids"))
            for call_id in ids[:1]:  # one observation answers the step's call
                messages.append({"role": "tool", "tool_call_id": call_id, "content": text(entry.get("content"))})
            continue
        message: dict[str, Any] = {"role": role, "content": text(entry.get("content"))}
        calls = [call_of(c) for c in listed(entry.get("tool_calls")) if isinstance(c, dict) and c.get("id")]
        if role == "assistant" and calls:
            message["tool_calls"] = calls
        messages.append(message)
    return messages


def text_actions(history: list[dict[str, Any]], session: str) -> list[dict[str, Any]]:
    """Assistant replies with a fenced command become a thought plus one bash call; the user message right after
    (the command's output) becomes its result.
    """
    messages: list[dict[str, Any]] = []
    pending: str | None = None
    for n, entry in enumerate(history):
        role, content = entry.get("role"), text(entry.get("content"))
        if role == "user" and pending is not None:
            messages.append({"role": "tool", "tool_call_id": pending, "content": content})
            pending = None
            continue
        fences = list(FENCE.finditer(content)) if role == "assistant" else []
        if not fences:
            messages.append({"role": role, "content": content})
            continue
        last = fences[-1]
        command = last.group(1).rstrip("\n")
        thought = (content[: last.start()] + content[last.end() :]).strip()
        pending = f"call_{hashlib.sha256(f'{session}/{n}'.encode()).hexdigest()[:24]}"
        call = {
            "id": pending,
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})},
        }
        messages.append({"role": "assistant", "content": thought, "tool_calls": [call]})
    if pending is not None:  # the session ended on a command with no output: the reply stays, as text
        messages[-1] = {"role": "assistant", "content": text(history[-1].get("content"))}
    return messages


def model_of(data: dict[str, Any], path: str) -> str:
    mini = ((data.get("info") or {}).get("config") or {}).get("model") or {}
    if isinstance(mini.get("model_name"), str):  # mini-swe-agent: "google/gemini-3-pro-preview"
        return str(mini["model_name"]).rsplit("/", 1)[-1]
    config = data.get("replay_config")
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            config = None
    if isinstance(config, dict):
        name = ((config.get("agent") or {}).get("model") or {}).get("name")
        if isinstance(name, str) and name and name != "replay":
            return name
    run = Path(path).parent
    if run.name == "trajs":  # SWE-bench/experiments' layout: evaluation/<split>/<date>_<agent>_<model>/trajs/
        return run.parent.name
    return run.name.split("__", 1)[0] if "__" in run.name else "unknown"


def convert(data: dict[str, Any], path: str, source: dict[str, str]) -> dict[str, Any] | None:
    mini = str(data.get("trajectory_format", "")).startswith("mini-swe-agent")
    recorded = data.get("messages") if mini else data.get("history")
    history = [m for m in recorded or [] if isinstance(m, dict) and m.get("role")]
    if not history:
        return None
    native = any(m.get("tool_calls") for m in history)
    session = hashlib.sha256(json.dumps(history, sort_keys=True).encode()).hexdigest()
    messages = function_calling(history) if native else text_actions(history, session)
    if not any(m.get("tool_calls") for m in messages):
        return None
    return {
        "id": Path(path).name.removesuffix(".json").removesuffix(".traj"),
        "agent": f"mini-swe-agent {(data.get('info') or {}).get('mini_version', '')}".strip() if mini else "SWE-agent",
        "model": model_of(data, path),
        "converted": None if native else "text actions",
        "source": {**source, "path": path},
        "messages": messages,
    }


def problems(messages: list[dict[str, Any]]) -> list[str]:
    found = pairing_problems(messages)
    for message in messages:
        for call in message.get("tool_calls") or []:
            try:
                json.loads(call["function"]["arguments"])
            except ValueError:
                found.append(f"call {call['id']}: arguments are not JSON")
    return found


def git(git_dir: str, *args: str) -> bytes:
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True).stdout


def sources(args: argparse.Namespace) -> list[tuple[str, bytes]]:
    if args.git_dir:
        names = git(args.git_dir, "ls-tree", "-r", "--name-only", args.rev, "--", *args.paths).decode().splitlines()
        return [(name, git(args.git_dir, "show", f"{args.rev}:{name}")) for name in names if name.endswith(TRAJECTORY)]
    files: list[Path] = []
    for given in map(Path, args.paths):
        found = [f for f in given.rglob("*") if f.name.endswith(TRAJECTORY)] if given.is_dir() else [given]
        files.extend(sorted(found))
    return [(str(f), f.read_bytes()) for f in files]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", help=".traj files or folders (paths in the git tree with --git-dir)")
    parser.add_argument("--git-dir", help="read the paths from this git directory (a bare mirror) at --rev")
    parser.add_argument("--rev", default="HEAD", help="the commit to read with --git-dir (default HEAD)")
    parser.add_argument("--repo", default="", help="owner/name recorded as each session's source")
    parser.add_argument("--limit", type=int, help="keep at most this many sessions (in path order)")
    parser.add_argument("--out", type=Path, required=True, help="the .json.gz to write")
    args = parser.parse_args(argv)
    commit = git(args.git_dir, "rev-parse", args.rev).decode().strip() if args.git_dir else ""
    source = {"repo": args.repo, "commit": commit}
    kept: list[dict[str, Any]] = []
    seen: set[str] = set()
    dropped: Counter[str] = Counter()
    for path, raw in sources(args):
        try:
            entry = convert(json.loads(raw), path, source)
        except (ValueError, KeyError, TypeError) as exc:
            dropped[f"unreadable ({type(exc).__name__})"] += 1
            continue
        if entry is None:
            dropped["no tool calls"] += 1
            continue
        if entry["model"] in HUMAN:
            dropped["written by a person"] += 1
            continue
        if problems(entry["messages"]):
            dropped["pairing or arguments"] += 1
            continue
        digest = hashlib.sha256(json.dumps(entry["messages"], sort_keys=True).encode()).hexdigest()
        if digest in seen:
            dropped["duplicate"] += 1
            continue
        seen.add(digest)
        kept.append(entry)
    if args.limit is not None:
        kept = kept[: args.limit]
    args.out.write_bytes(gzip.compress(json.dumps(kept, ensure_ascii=False).encode(), mtime=0))
    models = Counter(e["model"] for e in kept)
    print(f"{len(kept)} sessions to {args.out} ({dict(models)}); left out: {dict(dropped) or 'none'}", file=sys.stderr)


if __name__ == "__main__":
    main()
