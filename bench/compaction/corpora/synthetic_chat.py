"""(c2) Seeded long planning chats: a trip planned over a hundred-odd exchanges, with planted facts.

Replies are prose, bulky option lists (search results, train options, quotes: what trim_bulky targets) and
now and then a web_search tool call. Eight facts are planted, either stated by the user or picked by the user
from an assistant's option list ("option 3", so the value lives only in that list); some are changed later;
each is asked for later by a question that does not contain it (the probe is the request that question makes).
"""

from __future__ import annotations

import json
import random
from typing import Any

from strategies import Message

from . import Conversation, Corpus, Probe
from . import synthetic_text as text
from .planted import Fact, check_planted, draw_value, free_slot

SYSTEM = "You are a travel-planning assistant. Be concrete; keep track of bookings, times and money for the user."
FIRST = "Help me plan a two-week trip through the Alps and northern Italy for four people this September."
# label, kind, how the user states it, how it looks as an option, the later question.
FACTS = (
    ("ferry booking code", "code", "The ferry booking code is {v}.", "Ferry {v}", "What was the ferry booking code?"),
    (
        "hotel deposit",
        "amount",
        "We paid a hotel deposit of {v}.",
        "Lakeside package, deposit {v}",
        "How much was the hotel deposit?",
    ),
    ("local guide", "name", "Our local guide will be {v}.", "Guided walk with {v}", "Who is our local guide?"),
    (
        "dinner reservation",
        "time",
        "Dinner is booked for {v}.",
        "Dinner seating at {v}",
        "What time is the dinner reservation?",
    ),
    (
        "train seat reference",
        "code",
        "The seat reference for the train is {v}.",
        "Panorama train {v}",
        "What is the train seat reference?",
    ),
    (
        "total budget",
        "amount",
        "Our total budget is {v}.",
        "All-inclusive bundle at {v}",
        "What is our total budget now?",
    ),
    (
        "airport driver",
        "name",
        "The airport driver is {v}.",
        "Private transfer, driver {v}",
        "Who is driving us from the airport?",
    ),
    ("museum slot", "time", "Our museum slot is at {v}.", "Museum entry slot {v}", "When is our museum slot?"),
)
HEADERS = ("Search results:", "Train options from {a} to {b}:", "Quotes for {a}:")
WEB_SEARCH: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "web_search",
        "description": "Search the web.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}
MIN_GAP = 15  # exchanges between a value's planting and the question that needs it


def generate(chats: int, exchanges: int, seed: int) -> Corpus:
    conversations = [_chat(random.Random(f"{seed}-chat-{n}"), f"chat-{n}", exchanges) for n in range(chats)]
    description = (
        f"{chats} seeded planning chats (seed {seed}) of about {exchanges} exchanges each: prose, bulky option "
        "lists, some web_search calls; 8 planted facts each, stated by the user or picked from an option list, "
        "some changed later, each asked for by a later question"
    )
    return Corpus("chat", "synthetic planning chat", description, conversations, has_probes=True)


class _Chat:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.messages: list[Message] = [{"role": "system", "content": SYSTEM}]
        self.calls = 0

    def say(self, question: str, reply: str) -> int:
        self.messages.append({"role": "user", "content": question})
        self.messages.append({"role": "assistant", "content": reply})
        return len(self.messages) - 1

    def options(self, count: int, planted: str | None = None) -> tuple[str, int]:
        """A bulky reply; a planted value becomes one option. Returns the reply and that option's number."""
        rng = self.rng
        header = rng.choice(HEADERS).format(
            a=rng.choice(text.PROSE).capitalize(), b=rng.choice(text.PROSE).capitalize()
        )
        items = [text.option_item(rng) for _ in range(count)]
        pick = rng.randrange(count)
        if planted is not None:
            items[pick] = text.option_item(rng, planted)
        return text.option_list(rng, header, items), pick + 1

    def filler(self) -> None:
        rng = self.rng
        kind = rng.choices(("prose", "bulky", "tool", "short"), (55, 25, 15, 5))[0]
        ask = f"{text.sentence(rng)} {text.sentence(rng)[:-1]}?"
        if kind == "prose":
            self.say(ask, text.prose(rng, rng.randint(400, 1400)))
        elif kind == "bulky":
            self.say(ask, self.options(rng.randint(6, 14))[0])
        elif kind == "short":
            self.say("Thanks, sounds good.", "Great, noted.")
        else:
            self.messages.append({"role": "user", "content": ask})
            call_id = f"call_{self.calls}"
            self.calls += 1
            query = " ".join(rng.choice(text.PROSE) for _ in range(4))
            function = {"name": "web_search", "arguments": json.dumps({"query": query})}
            self.messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": call_id, "type": "function", "function": function}],
                }
            )
            hits = [
                {
                    "title": text.sentence(rng),
                    "url": f"https://example.org/{text.ident(rng)}",
                    "snippet": text.prose(rng, 200),
                }
                for _ in range(rng.randint(4, 9))
            ]
            self.messages.append(
                {"role": "tool", "tool_call_id": call_id, "content": json.dumps({"results": hits}, indent=2)}
            )
            self.messages.append({"role": "assistant", "content": text.prose(rng, rng.randint(300, 900))})


def _chat(rng: random.Random, name: str, exchanges: int) -> Conversation:
    events: dict[int, tuple[str, Fact, int]] = {}  # exchange -> (plant | change | ask, fact, version)
    taken: set[int] = set()
    used: set[str] = set()
    facts: list[Fact] = []
    for label, kind, *_ in FACTS:
        values = [draw_value(rng, kind, used, currency="€") for _ in range(2 if rng.random() < 0.4 else 1)]
        plant = free_slot(rng, taken, 1, exchanges - 3 * MIN_GAP)
        if plant is None:
            continue
        events[plant] = ("plant", fact := Fact(kind, label, values, planted_at=[-1] * len(values)), 0)
        facts.append(fact)
        change = free_slot(rng, taken, plant + MIN_GAP, exchanges - MIN_GAP - 1) if len(values) > 1 else None
        if change is None:
            fact.values, fact.planted_at = values[:1], [-1]
        else:
            events[change] = ("change", fact, 1)
        starts = [plant] if change is None else [plant, change]
        for version, begin in enumerate(starts):
            end = starts[version + 1] if version + 1 < len(starts) else exchanges
            ask = free_slot(rng, taken, begin + MIN_GAP, end - 1) if end - begin > MIN_GAP else None
            if ask is not None:
                events[ask] = ("ask", fact, version)

    chat = _Chat(rng)
    chat.say(FIRST, text.prose(rng, 900))
    templates = {label: (said, option, question) for label, _, said, option, question in FACTS}
    for e in range(1, exchanges):
        if e not in events:
            chat.filler()
            continue
        what, fact, version = events[e]
        said, option, question = templates[fact.label]
        value = fact.values[version]
        if what == "ask":
            fact.needs.append((chat.say(f"Quick question: {question}", f"The {fact.label} is {value}."), version))
        elif what == "change":
            fact.planted_at[version] = len(chat.messages)
            chat.say(f"Change of plan: {said.format(v=value)}", "Understood, I have updated the plan.")
        elif rng.random() < 0.5:
            fact.planted_at[version] = len(chat.messages)
            chat.say(f"{text.sentence(rng)} {said.format(v=value)}", text.prose(rng, rng.randint(300, 800)))
        else:  # the user picks the planted option; the confirmation does not repeat it
            reply, number = chat.options(rng.randint(6, 14), option.format(v=value))
            fact.planted_at[version] = chat.say(f"What are the options for the {fact.label.split()[0]}?", reply)
            chat.say(f"Let's take option {number}.", f"Done, option {number} is booked.")
    facts = [f for f in facts if f.needs]
    check_planted(chat.messages, facts)
    probes: list[Probe] = sorted((p for f in facts for p in f.probes()), key=lambda p: p.answer_at)
    return Conversation(name, chat.messages, [WEB_SEARCH], tuple(probes))
