"""The protocol's JSON shapes as TypedDicts (snake_case, like the wire; see docs/protocol.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Optional, TypedDict, Union

Json = Any
JsonObject = dict[str, Any]
StateScope = Literal["conversation", "actor", "subject", "runner"]
StorageArea = Literal["plugin", "workspace", "binding"]
TERMINAL_RESULT_TYPES = frozenset({"run.completed", "run.failed"})


class ContentPart(TypedDict, total=False):
    type: str
    text: str


class Message(TypedDict, total=False):
    role: str
    content: Union[str, list[ContentPart], None]
    tool_calls: list[JsonObject]
    tool_call_id: str
    name: str


class MessageChunk(Message, total=False):
    msg_sequence: int
    is_final: bool


class RunResult(TypedDict, total=False):
    run_id: str
    type: str
    data: JsonObject
    usage: JsonObject
    sequence: int
    timestamp: int


class Input(TypedDict, total=False):
    text: Optional[str]
    contents: list[JsonObject]
    attachments: list[JsonObject]
    interaction: Optional[JsonObject]


class ModelResource(TypedDict):
    model_id: str
    model_type: str
    provider: str
    operations: list[str]


class ToolResource(TypedDict, total=False):
    tool_name: str
    tool_type: str
    description: str
    operations: list[str]
    parameters: Optional[JsonObject]
    source: str
    source_id: Optional[str]
    title: Optional[str]
    annotations: Optional[JsonObject]
    output_schema: Optional[JsonObject]


class KnowledgeBaseResource(TypedDict):
    kb_id: str
    kb_name: str
    kb_type: str
    operations: list[str]


class Resources(TypedDict, total=False):
    models: list[ModelResource]
    tools: list[ToolResource]
    knowledge_bases: list[KnowledgeBaseResource]
    storage: Optional[JsonObject]
    platform_capabilities: Optional[JsonObject]


class AvailableApis(TypedDict, total=False):
    prompt_get: bool
    history_page: bool
    history_search: bool
    event_get: bool
    event_page: bool
    state: bool
    storage: bool
    steering_pull: bool
    run_get: bool


class ContextAccess(TypedDict, total=False):
    conversation_id: Optional[str]
    thread_id: Optional[str]
    latest_cursor: Optional[str]
    event_seq: Optional[int]
    transcript_seq: Optional[int]
    has_history_before: bool
    inline_policy: Optional[JsonObject]
    available_apis: Optional[AvailableApis]


class RuntimeContext(TypedDict, total=False):
    host: str
    protocol_version: str
    trace_id: str
    deadline_at: Optional[float]
    locale: Optional[str]
    timezone: Optional[str]
    metadata: Optional[JsonObject]


class RunContext(TypedDict, total=False):
    """The run context (proto/runnerhost/v1/context.proto) as plain JSON; unset messages are None."""

    run_id: str
    trigger: Optional[JsonObject]
    event: Optional[JsonObject]
    conversation: Optional[JsonObject]
    actor: Optional[JsonObject]
    subject: Optional[JsonObject]
    input: Optional[Input]
    delivery: Optional[JsonObject]
    resources: Optional[Resources]
    context: Optional[ContextAccess]
    state: Optional[JsonObject]
    runtime: Optional[RuntimeContext]
    config: Optional[JsonObject]
    metadata: Optional[JsonObject]


@dataclass(frozen=True)
class Turn:
    """One turn of a run: the run's own input (index 0), then each steered follow-up."""

    index: int
    text: str
    input: JsonObject
    #: The SteeringInputItem of a steered follow-up; None for the first turn.
    item: Optional[JsonObject] = None


@dataclass(frozen=True)
class Welcome:
    session_id: str
    host_version: str
    protocol_version: str
    runners: list[JsonObject] = field(default_factory=list)
    rejected: list[JsonObject] = field(default_factory=list)
    heartbeat_interval_ms: int = 0


def message_text(message: Optional[Any]) -> str:
    """The text of a message or chunk: its string content, or the text parts of its content list."""
    if not message:
        return ""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""
