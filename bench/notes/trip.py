"""The chat bench.notes replays: a long trip planning with planted facts, some changed by a later decision."""

from __future__ import annotations

import random

from strategies import Message
from strategies.conversation import text_of

# (turn, label, user message, value): a value to find later; a label planted twice is a changed decision.
FACTS = [
    (3, "traveller", "The traveller is Priya Raman, passport ending 4471.", "Priya Raman"),
    (8, "hotel booking", "Booked it: the confirmation code is HTL-4821-QX.", "HTL-4821-QX"),
    (14, "budget", "Our budget for the whole trip is $3,250.45.", "$3,250.45"),
    (21, "hotel", "Let's take Hotel Adler in Innsbruck.", "Hotel Adler"),
    (30, "flight", "The flight is LH 2417 on 14 March.", "LH 2417"),
    (38, "diet", "Remember that she needs a vegetarian menu everywhere.", "vegetarian"),
    (47, "departure", "We leave the hotel at 07:55 on the last day.", "07:55"),
    (60, "train", "Book the train ICE 578 from Munich.", "ICE 578"),
    (95, "budget", "Change of plan: the budget is now $3,900.15.", "$3,900.15"),
    (110, "hotel", "We changed our minds: Hotel Sonnenhof instead of Hotel Adler.", "Hotel Sonnenhof"),
    (130, "departure", "New time: we leave the hotel at 08:35 on the last day.", "08:35"),
]
SMALL_TALK = ["sounds good, thanks", "ok, what else should we look at?", "great, let us keep going", "nice"]
TOPICS = ["museums", "restaurants", "hiking trails", "ski passes", "markets", "day trips", "cafes", "parking"]


def conversation(turns: int, seed: int = 11) -> list[Message]:
    """System prompt, then `turns` user/assistant pairs and a last user message."""
    rng = random.Random(seed)
    planted = {turn: text for turn, _, text, _ in FACTS}
    messages: list[Message] = [{"role": "system", "content": "You are a travel assistant. Be concise."}]
    for turn in range(turns + 1):
        if turn in planted:
            ask, answer = planted[turn], "Noted, I will keep that in mind."
        elif rng.random() < 0.4:
            topic = rng.choice(TOPICS)
            ask = f"can you look up {topic} near the hotel?"
            options = [f"{n}. Option {rng.choice('ABCDEFGH')}{n}: {rng.randrange(5, 90)} min away" for n in range(1, 7)]
            answer = "Search results:\n" + "\n".join(options) + "\nWhich one do you like?"
        else:
            ask, answer = rng.choice(SMALL_TALK), "Happy to help with the next step of the trip."
        messages.append({"role": "user", "content": ask})
        if turn < turns:
            messages.append({"role": "assistant", "content": answer})
    return messages


def requests(history: list[Message]) -> list[list[Message]]:
    return [history[: i + 1] for i, m in enumerate(history) if m["role"] == "user"]


def facts_in(messages: list[Message]) -> dict[str, tuple[bool, list[str]]]:
    """Per fact label: is its current value in the messages, and which replaced values still are."""
    text = "\n".join(text_of(m.get("content")) for m in messages)
    out: dict[str, tuple[bool, list[str]]] = {}
    for label in dict.fromkeys(label for _, label, _, _ in FACTS):
        values = [value for _, name, _, value in FACTS if name == label]
        out[label] = (values[-1] in text, [v for v in values[:-1] if v in text])
    return out
