"""The rendered-prompt corpus: model identities, conversations, and how each case is rendered.

Each case renders one conversation through ``renderers`` exactly as Verifiers' ``TrainClient``
would for a Miles run (``create_renderer(load_tokenizer(id), chat_template_kwargs=...)``, with
the kwargs ``--apply-chat-template-kwargs`` passes), and returns the steps a reviewer should
see: prompts, the model's completion, bridged next-turn prompts and full re-renders.

It imports nothing but the standard library and ``renderers`` (``snapshot_text`` too), so
``render_documents`` can run in another interpreter: the episode side's, whose Renderers is the
one the snapshots are for.

Model completions are written out per model family (the text the model would emit, stop
token included) and checked with the renderer's own parser, so a case cannot silently feed a
completion the renderer would not recognise.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from miles_verifiers_conformance.snapshot_text import document, step_lines

GET_WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}
TOOLS = [GET_WEATHER]
SYSTEM = "You are a concise assistant. Use tools when they help."
SUM_QUESTION = "What is 17 + 25?"
WEATHER_QUESTION = "What is the weather in Paris right now?"
WEATHER_ARGS = {"city": "Paris"}
WEATHER_RESULT = "Sunny, 21 C, light wind."
CALL_ID = "call_0"


@dataclass(frozen=True)
class Completion:
    """What the model says in one turn; ``truncated`` cuts it at half, with no stop token."""

    content: str = ""
    reasoning: str | None = None
    tool_call: tuple[str, Mapping[str, Any]] | None = None
    truncated: bool = False

    def as_message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.reasoning:
            message["reasoning_content"] = self.reasoning
        if self.tool_call:
            name, arguments = self.tool_call
            message["tool_calls"] = [
                {
                    "type": "function",
                    "id": CALL_ID,
                    "function": {"name": name, "arguments": dict(arguments)},
                }
            ]
        return message


def _qwen3_text(c: Completion) -> str:
    think = f"<think>\n{c.reasoning}\n</think>\n\n" if c.reasoning else ""
    body = c.content
    if c.tool_call:
        name, arguments = c.tool_call
        body += (
            f"<tool_call>\n{json.dumps({'name': name, 'arguments': dict(arguments)})}\n</tool_call>"
        )
    return think + body + "<|im_end|>"


def _llama3_text(c: Completion) -> str:
    if c.tool_call:
        name, arguments = c.tool_call
        return json.dumps({"name": name, "parameters": dict(arguments)}) + "<|eot_id|>"
    return c.content + "<|eot_id|>"


def _gpt_oss_text(c: Completion) -> str:
    # The generation prompt opens the analysis channel, so the model starts with its reasoning.
    analysis = (c.reasoning or "Answer directly.") + "<|end|><|start|>assistant"
    if c.tool_call:
        name, arguments = c.tool_call
        return (
            f"{analysis}<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>"
            f"{json.dumps(dict(arguments))}<|call|>"
        )
    return f"{analysis}<|channel|>final<|message|>{c.content}<|return|>"


@dataclass(frozen=True)
class Identity:
    """A model identity the project builds a tokenizer for, and how its family talks."""

    model_id: str
    slug: str
    completion_text: Callable[[Completion], str]
    # Kwargs every case passes so renders are reproducible (gpt-oss would stamp today's date).
    base_kwargs: Mapping[str, Any] = field(default_factory=dict)
    # (on, off) as --apply-chat-template-kwargs would pass them; None: the family has no knob.
    thinking_kwargs: tuple[Mapping[str, Any], Mapping[str, Any]] | None = None
    # A knob users commonly pass that this family's renderer does not accept.
    foreign_kwargs: Mapping[str, Any] | None = None


IDENTITIES: tuple[Identity, ...] = (
    Identity(
        "Qwen/Qwen3-0.6B",
        "qwen3",
        _qwen3_text,
        thinking_kwargs=({"enable_thinking": True}, {"enable_thinking": False}),
    ),
    Identity(
        "meta-llama/Llama-3.2-1B-Instruct",
        "llama3",
        _llama3_text,
        foreign_kwargs={"enable_thinking": False},
    ),
    Identity(
        "openai/gpt-oss-20b",
        "gpt-oss",
        _gpt_oss_text,
        base_kwargs={"conversation_start_date": "2025-06-01"},
        thinking_kwargs=({"reasoning_effort": "high"}, {"reasoning_effort": "low"}),
    ),
)


@dataclass(frozen=True)
class Step:
    """One token sequence of a case, with the messages its spans refer to."""

    title: str
    token_ids: Sequence[int]
    message_indices: Sequence[int]
    messages: Sequence[Mapping[str, Any]] = ()
    sampled_mask: Sequence[bool] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class CaseResult:
    kwargs: Mapping[str, Any]
    renderer: str
    steps: tuple[Step, ...] = ()
    rejected: str | None = None  # exception type when the renderer refused the kwargs


class RendererFactory:
    """Builds renderers for one identity, as Verifiers' TrainClient would."""

    def __init__(self, identity: Identity, tokenizer: Any) -> None:
        self.identity = identity
        self.tokenizer = tokenizer

    def create(self, extra_kwargs: Mapping[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        import renderers

        kwargs = {**self.identity.base_kwargs, **(extra_kwargs or {})}
        return renderers.create_renderer(
            self.tokenizer, chat_template_kwargs=kwargs or None
        ), kwargs

    def completion_ids(
        self, renderer: Any, prompt: Step, completion: Completion, tools: Sequence[Any] | None
    ) -> list[int]:
        ids = self.tokenizer.encode(
            self.identity.completion_text(completion), add_special_tokens=False
        )
        if completion.truncated:
            return ids[: len(ids) // 2]
        parsed = parse_reply(renderer, prompt, ids, tools)
        if completion.tool_call:
            names = [call.name for call in parsed.tool_calls]
            if names != [completion.tool_call[0]]:
                raise AssertionError(
                    f"{self.identity.slug}: the corpus completion does not parse as a tool call ({parsed})"
                )
        elif parsed.content.strip() != completion.content.strip():
            raise AssertionError(
                f"{self.identity.slug}: the corpus completion parses to {parsed.content!r}"
            )
        return ids


def parse_reply(
    renderer: Any, prompt: Step, ids: Sequence[int], tools: Sequence[Any] | None
) -> Any:
    """Parse sampled ids as Renderers' own generate() does: with the prompt they were sampled
    after, where parse_response takes it (from 0.1.12; it tells reasoning the prompt opened)."""
    context = (
        {"prompt_ids": list(prompt.token_ids)}
        if "prompt_ids" in inspect.signature(renderer.parse_response).parameters
        else {}
    )
    return renderer.parse_response(list(ids), tools=list(tools) if tools else None, **context)


def _render_step(
    title: str,
    renderer: Any,
    messages: list[dict[str, Any]],
    tools: Sequence[Any] | None,
    **notes: Any,
) -> Step:
    rendered = renderer.render(
        messages, tools=list(tools) if tools else None, add_generation_prompt=True
    )
    return Step(
        title,
        list(rendered.token_ids),
        list(rendered.message_indices),
        messages,
        list(rendered.sampled_mask),
        tuple(f"{k}: {v}" for k, v in notes.items()),
    )


def _completion_step(ids: Sequence[int], completion: Completion) -> Step:
    note = (
        ("truncated: no stop token (the response limit was reached)",)
        if completion.truncated
        else ()
    )
    return Step("model completion", list(ids), [-2] * len(ids), (), [True] * len(ids), note)


def _next_turn_steps(
    renderer: Any,
    prompt: Step,
    completion_ids: Sequence[int],
    history: list[dict[str, Any]],
    new_messages: list[dict[str, Any]],
    tools: Sequence[Any] | None,
) -> list[Step]:
    """The next prompt as Verifiers builds it: a bridge when the renderer allows, else a re-render."""
    bridged = renderer.bridge_to_next_turn(
        list(prompt.token_ids),
        list(completion_ids),
        new_messages,
        tools=list(tools) if tools else None,
    )
    full = _render_step("next prompt, full re-render", renderer, history + new_messages, tools)
    if bridged is None:
        return [
            Step(
                full.title,
                full.token_ids,
                full.message_indices,
                full.messages,
                full.sampled_mask,
                ("bridge: declined by the renderer, so the conversation is re-rendered",),
            )
        ]
    same = list(bridged.token_ids) == list(full.token_ids)
    bridge = Step(
        "next prompt, bridged",
        list(bridged.token_ids),
        list(bridged.message_indices),
        new_messages,
        list(bridged.sampled_mask),
        (
            f"bridge: extends turn 1 prompt + completion ({len(prompt.token_ids) + len(completion_ids)} tokens)",
            f"equals a full re-render: {'yes' if same else 'no'}",
        ),
    )
    return [bridge] if same else [bridge, full]


Reply = Callable[[Any, Step, list[int]], dict[str, Any]]


def _two_turns(
    factory: RendererFactory,
    extra_kwargs: Mapping[str, Any] | None,
    history: list[dict[str, Any]],
    completion: Completion,
    new_messages: list[dict[str, Any]],
    tools: Sequence[Any] | None = None,
    *,
    reply: Reply | None = None,
) -> CaseResult:
    """Turn 1 (``history`` rendered, then ``completion``), then the next prompt: ``history``
    with turn 1's reply, then ``new_messages``. The reply is ``reply(renderer, prompt, ids)``
    where given, else the completion's own message."""
    renderer, kwargs = factory.create(extra_kwargs)
    prompt = _render_step("turn 1 prompt", renderer, history, tools)
    ids = factory.completion_ids(renderer, prompt, completion, tools)
    sent = reply(renderer, prompt, ids) if reply else completion.as_message()
    steps = [prompt, _completion_step(ids, completion)]
    steps += _next_turn_steps(renderer, prompt, ids, history + [sent], new_messages, tools)
    return CaseResult(kwargs, type(renderer).__name__, tuple(steps))


# -- the cases ---------------------------------------------------------------------------


def case_single_turn(factory: RendererFactory) -> CaseResult:
    renderer, kwargs = factory.create()
    step = _render_step("prompt", renderer, [{"role": "user", "content": SUM_QUESTION}], None)
    return CaseResult(kwargs, type(renderer).__name__, (step,))


def case_system_with_tools(factory: RendererFactory) -> CaseResult:
    renderer, kwargs = factory.create()
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": WEATHER_QUESTION},
    ]
    return CaseResult(
        kwargs, type(renderer).__name__, (_render_step("prompt", renderer, messages, TOOLS),)
    )


def case_tool_cycle_bridge(factory: RendererFactory) -> CaseResult:
    history = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": WEATHER_QUESTION}]
    completion = Completion(
        reasoning="The user wants the weather; call the tool.",
        tool_call=("get_weather", WEATHER_ARGS),
    )
    tool_result = {
        "role": "tool",
        "tool_call_id": CALL_ID,
        "name": "get_weather",
        "content": WEATHER_RESULT,
    }
    return _two_turns(factory, None, history, completion, [tool_result], TOOLS)


def _thinking_case(factory: RendererFactory, on: bool) -> CaseResult:
    assert factory.identity.thinking_kwargs is not None, "the family has no thinking knob"
    renderer, kwargs = factory.create(factory.identity.thinking_kwargs[0 if on else 1])
    messages = [
        {"role": "user", "content": SUM_QUESTION},
        {"role": "assistant", "content": "42", "reasoning_content": "17 + 25 = 42."},
        {"role": "user", "content": "And 42 + 8?"},
    ]
    return CaseResult(
        kwargs, type(renderer).__name__, (_render_step("prompt", renderer, messages, None),)
    )


def case_thinking_kwargs_rejected(factory: RendererFactory) -> CaseResult:
    foreign = factory.identity.foreign_kwargs or {}
    kwargs = {**factory.identity.base_kwargs, **foreign}
    try:
        renderer, kwargs = factory.create(foreign)
    except ValueError as error:
        return CaseResult(kwargs, "-", rejected=type(error).__name__)
    return CaseResult(
        kwargs,
        type(renderer).__name__,
        (_render_step("prompt", renderer, [{"role": "user", "content": SUM_QUESTION}], None),),
    )


def case_thinking_on(factory: RendererFactory) -> CaseResult:
    return _thinking_case(factory, on=True)


def case_thinking_off(factory: RendererFactory) -> CaseResult:
    return _thinking_case(factory, on=False)


COUNT_REQUEST = "Count from 1 to 30, separated by commas."
COUNTING = ", ".join(str(i) for i in range(1, 31))


def _cut_then_continue(
    factory: RendererFactory,
    extra_kwargs: Mapping[str, Any] | None,
    completion: Completion,
    as_message: Reply,
) -> CaseResult:
    """The counting request, a reply cut by the length limit, then "Continue.": the history
    holds the cut reply as ``as_message(renderer, prompt, ids)`` makes it."""
    history = [{"role": "user", "content": COUNT_REQUEST}]
    continue_ = [{"role": "user", "content": "Continue."}]
    return _two_turns(factory, extra_kwargs, history, completion, continue_, reply=as_message)


def case_truncated_then_bridge(factory: RendererFactory) -> CaseResult:
    # Thinking off where the family has the knob: the completion is plain text cut short.
    off = factory.identity.thinking_kwargs[1] if factory.identity.thinking_kwargs else None
    completion = Completion(
        content=COUNTING,
        reasoning="Count." if factory.identity.slug == "gpt-oss" else None,
        truncated=True,
    )
    return _cut_then_continue(
        factory,
        off,
        completion,
        lambda _renderer, _prompt, ids: {
            "role": "assistant",
            "content": factory.tokenizer.decode(ids),
        },
    )


def case_follow_up_rerender(factory: RendererFactory) -> CaseResult:
    # Default kwargs: with thinking on, a new user turn drops history reasoning, so the
    # renderer cannot extend the previous tokens and the conversation is re-rendered.
    history = [{"role": "user", "content": SUM_QUESTION}]
    completion = Completion(content="42", reasoning="17 + 25 = 42.")
    double = [{"role": "user", "content": "Now double it."}]
    return _two_turns(factory, None, history, completion, double)


def case_cut_in_reasoning_then_bridge(factory: RendererFactory) -> CaseResult:
    # Thinking on, and the length limit falls inside the reasoning. The history holds the cut
    # reply as the renderer parses it, which changed between Renderers releases.
    assert factory.identity.thinking_kwargs is not None, "the family has no thinking knob"

    def parsed(renderer: Any, prompt: Step, ids: list[int]) -> dict[str, Any]:
        reply = parse_reply(renderer, prompt, ids, None)
        return {
            "role": "assistant",
            "content": reply.content,
            "reasoning_content": reply.reasoning_content,
        }

    completion = Completion(content="Done.", reasoning=f"I will count: {COUNTING}.", truncated=True)
    return _cut_then_continue(factory, factory.identity.thinking_kwargs[0], completion, parsed)


CASES: Mapping[str, Callable[[RendererFactory], CaseResult]] = {
    "single_turn": case_single_turn,
    "system_with_tools": case_system_with_tools,
    "tool_cycle_bridge": case_tool_cycle_bridge,
    "thinking_on": case_thinking_on,
    "thinking_off": case_thinking_off,
    "truncated_then_bridge": case_truncated_then_bridge,
    "cut_in_reasoning_then_bridge": case_cut_in_reasoning_then_bridge,
    "follow_up_rerender": case_follow_up_rerender,
    "thinking_kwargs_rejected": case_thinking_kwargs_rejected,
}


def cases_for(identity: Identity) -> tuple[str, ...]:
    """The cases that apply to a family: thinking on/off where it has the knob, otherwise
    the record that its renderer refuses another family's knob."""
    thinking = ("thinking_on", "thinking_off") if identity.thinking_kwargs else ()
    rejected = ("thinking_kwargs_rejected",) if identity.foreign_kwargs else ()
    cut = ("cut_in_reasoning_then_bridge",) if identity.thinking_kwargs else ()
    fixed = (
        "single_turn",
        "system_with_tools",
        "tool_cycle_bridge",
        "truncated_then_bridge",
        "follow_up_rerender",
    )
    return fixed[:3] + thinking + rejected + fixed[3:4] + cut + fixed[4:]


def render_document(identity: Identity, case: str, result: CaseResult, decode: Callable) -> str:
    fields = {
        "model": identity.model_id,
        "case": case,
        "renderer": result.renderer,
        "chat_template_kwargs": dict(result.kwargs),
    }
    if result.rejected:
        fields["outcome"] = f"the renderer rejects these kwargs ({result.rejected})"
    sections = [
        step_lines(
            s.title, s.token_ids, s.message_indices, s.messages, s.sampled_mask, s.notes, decode
        )
        for s in result.steps
    ]
    return document(fields, sections)


def render_documents() -> dict[str, str]:
    """Every case's snapshot text, keyed ``<identity slug>-<case>``, as the installed
    Renderers renders it (tokenizers loaded by hub id, as Renderers loads them)."""
    from renderers.base import load_tokenizer

    documents = {}
    for identity in IDENTITIES:
        tokenizer = load_tokenizer(identity.model_id)
        for case in cases_for(identity):
            result = CASES[case](RendererFactory(identity, tokenizer))
            documents[f"{identity.slug}-{case}"] = render_document(
                identity, case, result, tokenizer.decode
            )
    return documents
