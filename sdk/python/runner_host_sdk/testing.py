"""The test kit: an in-memory fake host for runner authors' unit tests (stdlib unittest or pytest).

``FakeHost`` runs the SDK's own dispatcher, emitters and host-API surface, in memory, with the
models, tools and knowledge bases given as plain functions; what the run was not granted fails
with UnauthorizedError, as on the host. See sdk/python/README.md#test-a-runner-with-the-test-kit.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Optional, Sequence, Union

from .errors import host_api_error
from .results import DEFAULT_MAX_BATCH, DEFAULT_MAX_FRAME_BYTES, Outbox
from .runner import Logger, Runner, RunDispatcher
from .types import JsonObject, Message, RunContext, RunResult, message_text

FakeModel = Callable[[list[Message]], Any]  # -> str | Message | {"message", "usage"} (or awaitable)
FakeTool = Callable[[JsonObject], Any]  # -> JSON object (or awaitable)
FakeKnowledgeBase = Callable[[str, Optional[int]], Any]  # -> list of RetrievalResultEntry
FakeHandler = Callable[[JsonObject], Any]  # -> response (or raises host_api_error(...))

ALL_APIS = {
    "prompt_get": True,
    "history_page": True,
    "history_search": True,
    "event_get": True,
    "event_page": True,
    "state": True,
    "storage": True,
    "steering_pull": True,
    "run_get": True,
}


async def _maybe(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _words(text: str) -> list[str]:
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])


def _answer(answer: Any) -> tuple[Message, Optional[JsonObject]]:
    if isinstance(answer, str):
        return {"role": "assistant", "content": answer}, None
    if isinstance(answer, dict) and isinstance(answer.get("message"), dict):
        return answer["message"], answer.get("usage")
    return answer, None


@dataclass
class Outcome:
    """How a run ended: ``status`` completed / failed, its results, the failure's code and
    error, the completed messages' texts and the streamed text."""

    status: str
    results: list[RunResult]
    code: Optional[str]
    error: Optional[str]
    messages: list[str]
    streamed: str


class FakeRun:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.run_id: str = ctx["run_id"]
        self.results: list[RunResult] = []
        self.ended = False
        self._steering: list[JsonObject] = []
        self._steered = asyncio.Event()
        self._done: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self.positions = 0

    @property
    def done(self) -> "asyncio.Future[Outcome]":
        """Resolves with the Outcome once the run's terminal result is out."""
        return self._done

    def add(self, result: RunResult) -> None:
        self.results.append(result)
        if result["type"] in ("run.completed", "run.failed") and not self._done.done():
            self.ended = True
            data = result["data"]
            failed = result["type"] == "run.failed"
            self._done.set_result(
                Outcome(
                    status="failed" if failed else "completed",
                    results=list(self.results),
                    code=data.get("code") if failed else None,
                    error=data.get("error") if failed else None,
                    messages=[message_text(r["data"]["message"]) for r in self.results if r["type"] == "message.completed"],
                    streamed="".join(
                        message_text(r["data"]["chunk"]) for r in self.results if r["type"] == "message.delta"
                    ),
                )
            )

    def queue(self, item: JsonObject) -> None:
        self._steering.append(item)
        self._steered.set()

    async def pull(self, mode: Optional[str], wait_ms: int) -> list[JsonObject]:
        if not self._steering and wait_ms > 0:
            self._steered.clear()
            try:
                await asyncio.wait_for(self._steered.wait(), wait_ms / 1000)
            except asyncio.TimeoutError:
                pass
        take = 1 if mode in ("one", "one-at-a-time", "one_at_a_time") else len(self._steering)
        items, self._steering = self._steering[:take], self._steering[take:]
        return items


class FakeHost:
    """``FakeHost(runners=[...], models={...}, tools={...})``; ``run = host.start(text="hi")``;
    ``outcome = await run.done``. Create it inside a running event loop (an async test)."""

    def __init__(
        self,
        *,
        runners: Sequence[Runner],
        models: Optional[dict[str, FakeModel]] = None,
        tools: Optional[dict[str, FakeTool]] = None,
        knowledge_bases: Optional[dict[str, FakeKnowledgeBase]] = None,
        prompt: Optional[list[Message]] = None,
        history: Optional[list[JsonObject]] = None,
        handlers: Optional[dict[str, FakeHandler]] = None,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        log: Optional[Logger] = None,
    ) -> None:
        self.runners = list(runners)
        self.models = models or {}
        self.tools = tools or {}
        self.knowledge_bases = knowledge_bases or {}
        self.prompt = prompt or []
        self.history = history or []
        self.handlers = handlers or {}
        #: Every host API call, in order: (method, request).
        self.calls: list[tuple[str, JsonObject]] = []
        #: The ``traceparent`` each host API call carried, in the order of ``calls`` (None: none).
        self.traceparents: list[Optional[str]] = []
        #: Every frame of results, as the real connection would send them.
        self.frames: list[list[RunResult]] = []
        #: The state store: scope -> key -> value.
        self.state: dict[str, dict[str, Any]] = {"conversation": {}, "actor": {}, "subject": {}, "runner": {}}
        #: The storage: "area:key" -> bytes.
        self.storage: dict[str, bytes] = {}
        self.runs: dict[str, FakeRun] = {}
        self.dispatcher = RunDispatcher(self.runners, Outbox(self._write, max_batch, max_frame_bytes), self, log or (lambda *a: None))

    async def _write(self, frame: list[RunResult]) -> None:
        self.frames.append(frame)
        for result in frame:
            run = self.runs.get(result["run_id"])
            if run is not None:
                run.add(result)

    def start(
        self,
        text: str = "",
        *,
        runner: Optional[str] = None,
        config: Optional[JsonObject] = None,
        deadline_ms: Optional[int] = None,
        conversation_id: Union[str, None, bool] = True,
        available_apis: Optional[dict[str, bool]] = None,
        context: Optional[Callable[[RunContext], RunContext]] = None,
        traceparent: Optional[str] = None,
    ) -> FakeRun:
        """Starts a run (``conversation_id=None``: an event without a conversation; ``traceparent``:
        the RunRequest's trace context, which the run's host calls carry)."""
        definition = next((r for r in self.runners if runner is None or r.name == runner), None)
        if definition is None:
            raise ValueError(f"runner: no runner named {runner!r}")
        conv = f"conv-{uuid.uuid4()}" if conversation_id is True else (conversation_id or None)
        perms = definition.permissions or {}
        apis = {
            **ALL_APIS,
            "history_page": "page" in (perms.get("history") or []) and bool(conv),
            "history_search": "search" in (perms.get("history") or []) and bool(conv),
            "event_get": "get" in (perms.get("events") or []),
            "event_page": "page" in (perms.get("events") or []) and bool(conv),
            "storage": bool(perms.get("storage")),
            "steering_pull": (definition.capabilities or {}).get("steering") is True and bool(conv),
            **(available_apis or {}),
        }
        ctx: RunContext = {
            "run_id": str(uuid.uuid4()),
            "trigger": {"type": "message.received", "source": "api", "timestamp": None},
            "event": {"event_id": str(uuid.uuid4()), "event_type": "message.received", "source": "api"},
            "conversation": {"conversation_id": conv} if conv else None,
            "actor": {"actor_type": "user", "actor_id": "u1", "metadata": None},
            "subject": None,
            "input": {"text": text, "contents": [], "attachments": [], "interaction": None},
            "delivery": None,
            "resources": {
                "models": [
                    {"model_id": m, "model_type": "llm", "provider": "fake", "operations": ["invoke", "stream", "count_tokens"]}
                    for m in self.models
                ],
                "tools": [
                    {"tool_name": t, "tool_type": "fake", "description": "", "operations": ["detail", "call"], "parameters": None, "source": "fake"}
                    for t in self.tools
                ],
                "knowledge_bases": [
                    {"kb_id": k, "kb_name": k, "kb_type": "fake", "operations": ["list", "retrieve"]} for k in self.knowledge_bases
                ],
                "storage": {"plugin_storage": apis["storage"], "workspace_storage": False, "binding_storage": False},
                "platform_capabilities": None,
            },
            "context": {
                "conversation_id": conv,
                "has_history_before": bool(self.history),
                "inline_policy": None,
                "available_apis": apis,  # type: ignore[typeddict-item]
            },
            "state": {"conversation": {}, "actor": {}, "subject": {}, "runner": {}},
            "runtime": {
                "host": "fake-host",
                "protocol_version": "1",
                "trace_id": "",
                "deadline_at": None if deadline_ms is None else time.time() + deadline_ms / 1000,
                "metadata": None,
            },
            "config": config or {},
            "metadata": {},
        }
        if context is not None:
            ctx = context(ctx)
        run = FakeRun(ctx)
        self.runs[ctx["run_id"]] = run
        self.dispatcher.start(definition.name, ctx, traceparent)
        return run

    async def run(self, text: str = "", **options: Any) -> Outcome:
        """Starts a run and waits for its outcome."""
        return await self.start(text, **options).done

    def steer(self, run_id: str, text: str) -> None:
        """Steers a follow-up message into a run (what the host does for a busy conversation)."""
        run = self._must(run_id)
        run.positions += 1
        run.queue(
            {
                "claimed_run_id": run_id,
                "input": {"text": text, "contents": [], "attachments": []},
                "event": {"event_id": str(uuid.uuid4()), "event_type": "message.received", "source": "api"},
                "item_id": str(uuid.uuid4()),
                "position": run.positions,
            }
        )

    def cancel(self, run_id: str, reason: str = "cancelled by the test") -> None:
        """The host's cancel."""
        self.dispatcher.cancel(run_id, reason)

    # ---- HostApiTransport ----

    async def unary(self, method: str, request: JsonObject, timeout: Optional[float], traceparent: Optional[str] = None) -> JsonObject:
        self.calls.append((method, request))
        self.traceparents.append(traceparent)
        if method in self.handlers:
            return await _maybe(self.handlers[method](request))
        run = self._active(method, request["run_id"])
        return await self._answer(method, request, run)

    async def stream_model(self, request: JsonObject, timeout: Optional[float], traceparent: Optional[str] = None) -> AsyncIterator[JsonObject]:
        self.calls.append(("StreamModel", request))
        self.traceparents.append(traceparent)
        run = self._active("StreamModel", request["run_id"])
        message, usage = await self._invoke(run, "stream", request)
        for i, piece in enumerate(_words(message_text(message))):
            await asyncio.sleep(0)
            yield {"chunk": {"role": "assistant", "content": piece, "msg_sequence": i + 1}, "usage": None}
        yield {"chunk": None, "usage": usage}

    # ---- the fake's answers ----

    def _must(self, run_id: str) -> FakeRun:
        if run_id not in self.runs:
            raise ValueError(f"run_id: no run {run_id}")
        return self.runs[run_id]

    def _active(self, method: str, run_id: str) -> FakeRun:
        run = self.runs.get(run_id)
        if run is None or run.ended:
            raise host_api_error("not_found", f"run session {run_id} not found or expired", method=method)
        return run

    def _require(self, run: FakeRun, method: str, api: str) -> None:
        if ((run.ctx.get("context") or {}).get("available_apis") or {}).get(api) is not True:
            raise host_api_error("unauthorized", f"{api} access not authorized", method=method)

    async def _invoke(self, run: FakeRun, op: str, request: JsonObject) -> tuple[Message, Optional[JsonObject]]:
        model_id = request.get("model_id")
        granted = next((m for m in (run.ctx.get("resources") or {}).get("models", []) if m["model_id"] == model_id), None)
        model = self.models.get(str(model_id))
        if granted is None or op not in granted["operations"] or model is None:
            raise host_api_error(
                "unauthorized",
                f"model {model_id} is not authorized for operation {op} for this run",
                method="StreamModel" if op == "stream" else "InvokeModel",
            )
        return _answer(await _maybe(model(request.get("messages") or [])))

    async def _answer(self, method: str, r: JsonObject, run: FakeRun) -> JsonObject:
        if method == "InvokeModel":
            message, usage = await self._invoke(run, "invoke", r)
            return {"message": message, "usage": usage}
        if method == "CountTokens":
            return {"tokens": -(-len(json.dumps(r.get("messages"))) // 4)}
        if method == "Rerank":
            raise host_api_error("unauthorized", "the fake host has no rerank models", method=method)
        if method in ("GetToolDetail", "CallTool"):
            name = r.get("tool_name")
            tool = self.tools.get(str(name))
            granted = any(t["tool_name"] == name for t in (run.ctx.get("resources") or {}).get("tools", []))
            if tool is None or not granted:
                raise host_api_error("unauthorized", f"tool {name} is not authorized for this run", method=method)
            if method == "GetToolDetail":
                return {"tool": {"name": name, "description": "", "parameters": {}}}
            return {"result": await _maybe(tool(r.get("parameters") or {}))}
        if method == "RetrieveKnowledge":
            kb = self.knowledge_bases.get(str(r.get("kb_id")))
            if kb is None:
                raise host_api_error("unauthorized", f"knowledge base {r.get('kb_id')} is not authorized for this run", method=method)
            return {"results": await _maybe(kb(str(r.get("query_text", "")), r.get("top_k")))}
        if method == "HistoryPage":
            self._require(run, method, "history_page")
            return {"items": list(reversed(self.history))[: r.get("limit") or 50], "has_more": False}
        if method == "HistorySearch":
            self._require(run, method, "history_search")
            return {"items": [], "total_count": 0, "query": r.get("query")}
        if method == "EventGet":
            self._require(run, method, "event_get")
            raise host_api_error("not_found", f"event {r.get('event_id')} not found", method=method)
        if method == "EventPage":
            self._require(run, method, "event_page")
            return {"items": [], "has_more": False}
        if method.startswith("State"):
            self._require(run, method, "state")
            store = self.state[r["scope"]]
            if method == "StateGet":
                return {"value": store.get(r["key"])}
            if method == "StateSet":
                store[r["key"]] = r.get("value")
                return {"success": True}
            if method == "StateDelete":
                return {"success": store.pop(r["key"], _MISSING) is not _MISSING}
            return {"keys": [k for k in store if k.startswith(r.get("prefix") or "")], "has_more": False}
        if method.startswith("Storage"):
            self._require(run, method, "storage")
            key = f"{r['area']}:{r.get('key', '')}"
            if method == "StorageGet":
                if key not in self.storage:
                    raise host_api_error("not_found", f"storage key {r['key']} not found", method=method)
                return {"value": self.storage[key]}
            if method == "StorageSet":
                self.storage[key] = bytes(r["value"])
                return {}
            if method == "StorageDelete":
                return {"success": self.storage.pop(key, None) is not None}
            prefix = f"{r['area']}:{r.get('prefix') or ''}"
            return {"keys": [k[len(r["area"]) + 1 :] for k in self.storage if k.startswith(prefix)], "has_more": False}
        if method == "PromptGet":
            self._require(run, method, "prompt_get")
            return {"prompt": self.prompt}
        if method == "SteeringPull":
            self._require(run, method, "steering_pull")
            return {"items": await run.pull(r.get("mode"), min(30_000, r.get("wait_ms") or 0))}
        if method == "RunGet":
            return {"run_id": run.run_id, "status": "completed" if run.ended else "running", "cancel_requested": False}
        raise host_api_error("invalid_argument", f"unknown method {method}", method=method)


_MISSING = object()
