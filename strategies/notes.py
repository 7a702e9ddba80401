"""notes: the long-chat recipe's running notes. The oldest turns are folded by a summariser into FACTS and
DECISIONS notes once the kept turns outgrow a budget, so what the user said is kept after its turns are gone.

Stateless and cache-aware like window: the conversation is walked unit by unit from its start, so every
request of a conversation finds the same fold points, and each fold's notes are looked up by content address
(previous key + folded transcript + prompt + model) in the NotesCache the Context carries. Between two folds
the notes message and the kept units before the question stay byte-identical, so the provider's prompt cache
holds, and only a request that crosses the budget needs a summariser call (usually made ahead of it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Literal

from pydantic import Field, field_validator

from .base import CHAIN, CONFIG_ONLY, Applied, Params, Strategy
from .budget import KeptTurns, budget_field, low_water_field, turns_budget
from .chain_syntax import StepSpec, fallback_chain, format_chain, parse_chain
from .context import Context
from .conversation import is_pinned_role
from .layout import Layout
from .messages import Message
from .notes_fold import (
    DEFAULT_PROMPT,
    NOTES_TOKENS_PER_WORD,
    chunk_limit,
    fold_key,
    notes_message,
    prompt_text,
    split_fold,
    summariser_messages,
)
from .notes_io import NO_SUMMARISER, SUMMARISER_EMPTY, NotesCache, NotesUnavailable, Summariser

# Each fold takes at least (1 - low_water + HEADROOM) * budget: as much as the budget's crossing needs when
# it comes with a small message, decided by units that are already kept well before it. So the fold can be
# made ahead of need and found ready; a crossing by a large message folds the rest in a second, small step.
HEADROOM = 0.1


class NotesParams(Params):
    renamed = {"keep_ratio": "low_water"}
    budget: int | None = budget_field("window's default budget less room for the notes; past it the oldest are folded")
    low_water: float = low_water_field("folded into the notes", "a fold on every request past the budget")
    model: str | None = Field(
        None,
        min_length=1,
        description="Model the notes are made with (default: summariser_model, else the request's). From a request "
        "only a model in summariser_models.",
        json_schema_extra=CONFIG_ONLY,
    )
    max_words: int = Field(180, ge=10, le=5000, description="Longest notes, in words, the summariser is asked for.")
    prompt: str | None = Field(
        None,
        min_length=1,
        description="Summariser instructions, '{max_words}' replaced by max_words (default: the built-in prompt).",
        json_schema_extra=CONFIG_ONLY,
    )
    role: Literal["system", "developer", "user"] = Field(
        "user",
        description="Role of the notes message. Not system by default: the notes repeat what the conversation "
        "said, tool output included, and must not speak with the system prompt's voice.",
        json_schema_extra=CONFIG_ONLY,
    )
    prepare_at: float = Field(
        0.8,
        gt=0,
        le=1,
        description="Once the kept units pass budget * prepare_at, the next fold is made in the background (1: never).",
    )
    fallback: str = Field(
        "window",
        min_length=1,
        description="Chain run instead when no notes can be had (window gets this budget unless it sets its own).",
        json_schema_extra={**CONFIG_ONLY, **CHAIN},
    )

    @field_validator("fallback")
    @classmethod
    def _a_chain_without_notes(cls, value: str) -> str:
        return fallback_chain(value, "notes")


@dataclass(frozen=True)
class Fold:
    positions: tuple[int, ...]  # units folded, oldest first
    upto: int  # the message walked when the fold happened: later messages of these units are dropped


@dataclass(frozen=True)
class Step:
    key: str
    chunk: str


@dataclass(frozen=True)
class FoldPoints:
    folds: list[Fold]
    kept: list[int]  # positions of the units still kept at the end
    kept_tokens: int
    ahead: Fold | None  # the next fold, when the kept units have passed budget * prepare_at


class Notes(Strategy[NotesParams]):
    """Pinned units always go in. Every other unit is walked in conversation order, message by message, into a
    kept part; whenever it exceeds budget, its oldest whole units are folded into the notes until it is at most
    budget * low_water. Sent: system/developer messages, the notes message, the first user message's unit, the
    kept units and the last user message's unit. A unit is folded whole, call and results together. Its folds
    come in steps of budget * (1 - low_water), as window's cuts: it needs no epochs.

    When no notes can be had it raises NotesUnavailable, and the chain runs its fallback chain instead.
    """

    name = "notes"
    uses_summariser = True
    params_model = NotesParams
    summary = "Fold the oldest turns into running notes (FACTS and DECISIONS) with a summariser, cached (cache-aware)."

    def fallback(self) -> str:
        """The fallback chain, its window given this budget unless it sets its own."""
        specs = parse_chain(self.params.fallback)
        if self.params.budget is not None:
            specs = [
                StepSpec(s.name, {"budget": self.params.budget, **s.params}) if s.name == "window" else s for s in specs
            ]
        return format_chain(specs)

    def apply(self, messages: list[Message], ctx: Context) -> Applied:
        layout = Layout.of(messages, ctx)
        held_back = NOTES_TOKENS_PER_WORD * self.params.max_words  # room for the notes themselves
        steady, question, budget, details = turns_budget(layout, self.params.budget, ctx, held_back)
        points = self._fold_points(layout, steady, budget, ctx)
        details.update(
            budget=budget,
            kept_units=len(set(points.kept) - question),
            kept_tokens=points.kept_tokens,
            folds=len(points.folds),
        )
        summariser, cache = ctx.summariser, ctx.notes_cache
        if summariser is None or cache is None or not (points.folds or points.ahead):
            if points.folds:
                raise NotesUnavailable(NO_SUMMARISER, details=details)
            return Applied(list(messages), details)

        model = self.params.model or summariser.default_model or ctx.model
        prompt = prompt_text(self.params.prompt or DEFAULT_PROMPT, self.params.max_words)
        limit = chunk_limit(
            summariser.context_window(model), ctx.tokens.count_text(prompt, model), self.params.max_words
        )
        make = partial(self._summarise, summariser, prompt, model)
        calls: list[str] = []
        steps = self._steps(layout, points.folds, "", limit, prompt, model, ctx)
        try:
            notes, hit = self._fold(steps, cache, partial(make, calls))
        except NotesUnavailable as exc:
            raise NotesUnavailable(exc.reason, exc.detail, details) from None
        details.update(chunks=len(steps), summariser_calls=len(calls), cached=hit)
        if points.ahead is not None:
            ahead = self._steps(layout, [points.ahead], steps[-1].key if steps else "", limit, prompt, model, ctx)
            details["ahead"] = self._fold_ahead(ahead, notes, cache, partial(make, []))
        if not points.folds:
            return Applied(list(messages), details)

        out = layout.gather(steady | question | set(points.kept))
        at = next((i for i, m in enumerate(out) if not is_pinned_role(m)), len(out))
        out.insert(at, notes_message(self.params.role, notes))
        details.update(
            folded_units=sum(len(f.positions) for f in points.folds), notes_tokens=ctx.count_message(out[at])
        )
        return Applied(out, details)

    def _fold_points(self, layout: Layout, steady: frozenset[int], budget: int, ctx: Context) -> FoldPoints:
        low = int(budget * self.params.low_water)
        at_least = budget - low + int(budget * HEADROOM)
        turns = KeptTurns(layout, steady)
        folds: list[Fold] = []

        def fold(index: int) -> None:
            # First the part that can be prepared ahead, then whatever else it takes to get down to low.
            prepared: list[int] = []
            taken = 0
            while turns.kept and taken < at_least:
                position, tokens = turns.take_oldest()
                prepared.append(position)
                taken += tokens
            rest = []
            while turns.kept and turns.total > low:
                rest.append(turns.take_oldest()[0])
            folds.extend(Fold(tuple(group), index) for group in (prepared, rest) if group)

        turns.walk(budget, fold, ctx.checkpoint)
        ahead = None
        if self.params.prepare_at < 1 and turns.total > budget * self.params.prepare_at:
            group, taken = [], 0
            for position in turns.kept:
                if taken >= at_least:
                    break
                group.append(position)
                taken += turns.unit_tokens[position]
            if taken >= at_least:
                ahead = Fold(tuple(group), len(layout.messages) - 1)
        return FoldPoints(folds, list(turns.kept), turns.total, ahead)

    def _steps(
        self, layout: Layout, folds: list[Fold], key: str, limit: int, prompt: str, model: str, ctx: Context
    ) -> list[Step]:
        """Every summariser call the folds take, in order, each with its content address."""
        steps: list[Step] = []
        for fold in folds:
            units = []
            for position in fold.positions:
                ctx.checkpoint()
                indices = [i for i in layout.units[position].indices if i <= fold.upto]
                # The messages' cached counts stand in for the transcript's: the same order of size, without
                # tokenizing every folded turn again on every request.
                units.append(([layout.messages[i] for i in indices], sum(layout.message_tokens[i] for i in indices)))
            for chunk in split_fold(units, limit, lambda text: ctx.tokens.count_text(text, model)):
                key = fold_key(key, chunk, prompt, model)
                steps.append(Step(key, chunk))
        return steps

    @staticmethod
    def _fold(steps: list[Step], cache: NotesCache, make: Callable[[str, str], str]) -> tuple[str, bool]:
        """The notes after every step, and whether they were all cached already. The newest stored notes are
        looked up first, so a conversation's request usually costs one cache read.
        """
        start, notes = 0, ""
        for index in range(len(steps) - 1, -1, -1):
            found = cache.get(steps[index].key)
            if found is not None:
                start, notes = index + 1, found
                break
        for step in steps[start:]:
            notes = cache.fold(step.key, partial(make, notes, step.chunk))
        return notes, start == len(steps)

    def _fold_ahead(self, steps: list[Step], notes: str, cache: NotesCache, make: Callable[[str, str], str]) -> bool:
        """Start the next fold in the background unless it is stored already. Speculative: failures are ignored."""
        if not steps:
            return False
        try:
            if cache.get(steps[-1].key) is not None:
                return False
            return cache.fold_ahead(steps[-1].key, partial(_fold_all, steps, notes, cache, make))
        except NotesUnavailable:
            return False

    @staticmethod
    def _summarise(summariser: Summariser, prompt: str, model: str, calls: list[str], notes: str, chunk: str) -> str:
        calls.append(chunk)
        answer = summariser.summarise(summariser_messages(prompt, notes, chunk), model).strip()
        if not answer:
            raise NotesUnavailable(SUMMARISER_EMPTY)
        return answer


def _fold_all(steps: list[Step], notes: str, cache: NotesCache, make: Callable[[str, str], str]) -> None:
    for step in steps:
        notes = cache.fold(step.key, partial(make, notes, step.chunk))
