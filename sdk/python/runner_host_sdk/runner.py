"""Runners and the dispatcher: one ``async def run(ctx, io)`` per runner, each run in its own task.

The run's ``io.aborted`` event is set, ``io.abort_reason`` filled and its task cancelled on the
host's cancel, at the run's deadline and when the connection is lost. Whatever the handler does
(returns, raises, ignores the cancel), its run gets exactly one terminal result, and nothing it
does reaches another run. See docs/runner-sdk.md and sdk/python/README.md.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Literal, Optional, Union

from .errors import HostApiError, RunAbortedError
from .host_api import HostApiTransport, RunHostApi
from .results import Outbox, RunResults
from .types import JsonObject, Message, RunContext, Turn

LogLevel = Literal["debug", "info", "warn", "error"]
Logger = Callable[[str, str, dict[str, Any]], None]


def stderr_logger(level: str, message: str, fields: dict[str, Any]) -> None:
    """Default logger: warnings and errors on stderr, one JSON line each."""
    if level in ("warn", "error"):
        sys.stderr.write(json.dumps({"level": level, "msg": f"runner-sdk: {message}", **fields}, default=str) + "\n")


RunHandler = Callable[[RunContext, "RunIO"], Awaitable[None]]
RUNNER_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass(frozen=True)
class Runner:
    """One runner component; its manifest is built from these fields (see manifest_of)."""

    name: str
    run: RunHandler
    label: Optional[dict[str, str]] = None
    description: Optional[dict[str, str]] = None
    capabilities: JsonObject = field(default_factory=dict)
    permissions: JsonObject = field(default_factory=dict)
    config_schema: list[JsonObject] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not RUNNER_NAME.match(self.name):
            raise ValueError(f"name: runner name must match {RUNNER_NAME.pattern} (got {self.name!r})")
        if not callable(self.run):
            raise ValueError(f"run: runner {self.name!r} needs an async function run(ctx, io)")


def runner(
    name: str,
    *,
    label: Optional[dict[str, str]] = None,
    description: Optional[dict[str, str]] = None,
    capabilities: Optional[JsonObject] = None,
    permissions: Optional[JsonObject] = None,
    config_schema: Optional[list[JsonObject]] = None,
) -> Callable[[RunHandler], Runner]:
    """Decorator: ``@runner("default", capabilities={...})`` over ``async def run(ctx, io)``."""

    def wrap(fn: RunHandler) -> Runner:
        return Runner(name, fn, label, description, capabilities or {}, permissions or {}, config_schema or [])

    return wrap


def manifest_of(r: Runner, author: str, plugin: str) -> JsonObject:
    """The manifest of a runner of plugin ``author/plugin``, as sent in hello."""
    return {
        "id": f"plugin:{author}/{plugin}/{r.name}",
        "name": r.name,
        "label": r.label or {"en_US": r.name},
        "description": r.description,
        "protocol_version": "1",
        "capabilities": r.capabilities,
        "permissions": r.permissions,
        "config_schema": r.config_schema,
        "metadata": {},
    }


def _text_of(value: Any) -> str:
    text = value.get("text") if isinstance(value, dict) else None
    return text if isinstance(text, str) else ""


class RunIO:
    """What a run handler gets besides its context: abort state, result emitters, host API."""

    def __init__(self, ctx: RunContext, results: RunResults, host: RunHostApi, log: Logger, deadline: Optional[float]) -> None:
        self.ctx = ctx
        self.run_id: str = ctx["run_id"]
        #: Set on cancel, at the deadline and when the connection is lost (the task is cancelled too).
        self.aborted = asyncio.Event()
        #: Why (a RunAbortedError with kind cancelled / deadline / disconnected / stopped), once aborted.
        self.abort_reason: Optional[RunAbortedError] = None
        #: The run's deadline (epoch seconds), or None.
        self.deadline = deadline
        self.host = host
        self.log = log
        self._results = results
        self._tool_calls = 0
        self._bridges: list[Any] = []
        apis = (ctx.get("context") or {}).get("available_apis") or {}
        self.steering_granted = apis.get("steering_pull") is True

    # ---- result emitters: each returns a future (await it for backpressure, or don't) ----

    def delta(self, piece: Union[str, JsonObject]) -> "asyncio.Future[None]":
        return self._results.delta(piece)

    def message(self, message: Union[Message, str], usage: Optional[JsonObject] = None) -> "asyncio.Future[None]":
        return self._results.message(message, usage)

    def tool_call_started(self, id: str, name: str, parameters: Optional[JsonObject] = None) -> "asyncio.Future[None]":
        return self._results.tool_call_started(id, name, parameters)

    def tool_call_completed(self, id: str, name: str, result: Optional[JsonObject] = None, error: Optional[str] = None) -> "asyncio.Future[None]":
        return self._results.tool_call_completed(id, name, result, error)

    def state(self, scope: str, key: str, value: Any) -> "asyncio.Future[None]":
        return self._results.state(scope, key, value)

    def emit(self, type: str, data: JsonObject, usage: Optional[JsonObject] = None) -> "asyncio.Future[None]":
        return self._results.emit(type, data, usage)

    def completed(self, *, finish_reason: str = "stop", message: Union[Message, str, None] = None, usage: Optional[JsonObject] = None) -> "asyncio.Future[None]":
        return self._results.completed(finish_reason=finish_reason, message=message, usage=usage)

    def failed(self, error: Union[str, BaseException], *, code: str = "runner.error", retryable: bool = False, usage: Optional[JsonObject] = None) -> "asyncio.Future[None]":
        return self._results.failed(error, code=code, retryable=retryable, usage=usage)

    async def tool_call(self, name: str, parameters: Optional[JsonObject] = None, *, id: Optional[str] = None) -> JsonObject:
        """Calls a host tool and reports it (tool.call.started, then tool.call.completed with its
        result or error). Returns the result; a refusal or failure is raised after being reported."""
        if id is None:
            self._tool_calls += 1
            id = f"call_{self._tool_calls}"
        params = parameters or {}
        self._results.tool_call_started(id, name, params)
        try:
            result = await self.host.tools.call(name, params)
        except Exception as e:
            self._results.tool_call_completed(id, name, None, str(e))
            raise
        self._results.tool_call_completed(id, name, result, None)
        return result

    # ---- steering ----

    async def turns(self, *, wait_ms: int = 0, mode: Optional[str] = None) -> AsyncIterator[Turn]:
        """The run's input as turn 0, then at each turn boundary the follow-ups steered into the
        run, until a pull finds none. Without the ``steering_pull`` grant: the first turn only."""
        index = 0
        first = self.ctx.get("input") or {"text": ""}
        yield Turn(index, _text_of(first), dict(first), None)
        if not self.steering_granted:
            return
        while not self.aborted.is_set():
            items = await self.host.steering.pull(wait_ms=wait_ms, mode=mode)
            if not items:
                return
            for item in items:
                index += 1
                yield Turn(index, _text_of(item.get("input")), item.get("input") or {}, item)

    async def drain_steering(self) -> list[JsonObject]:
        """The follow-ups queued now, without waiting; [] when steering is not granted."""
        return await self.host.steering.pull(wait_ms=0) if self.steering_granted else []

    # ---- MCP bridge ----

    def mcp_bridge(self, **options: Any) -> Any:
        """A run-scoped MCP server (streamable HTTP on 127.0.0.1, bearer secret) exposing this
        run's granted tools through the host API; ``async with io.mcp_bridge() as bridge``.
        It also closes when the run ends. See sdk/python/README.md#the-mcp-bridge."""
        from .mcp import McpBridge

        bridge = McpBridge(self, **options)
        self._bridges.append(bridge)
        return bridge

    async def _close_bridges(self) -> None:
        for bridge in self._bridges:
            await bridge.close()


@dataclass
class _ActiveRun:
    io: RunIO
    results: RunResults
    task: Optional["asyncio.Task[None]"] = None
    timer: Optional[asyncio.TimerHandle] = None


class RunDispatcher:
    """Runs requests with the runners of one plugin; results go to one outbox."""

    def __init__(self, runners: list[Runner], outbox: Outbox, transport: HostApiTransport, log: Logger = stderr_logger) -> None:
        self._runners: dict[str, Runner] = {}
        for r in runners:
            if r.name in self._runners:
                raise ValueError(f"runners: two runners are named {r.name!r}")
            self._runners[r.name] = r
        self._outbox = outbox
        self._transport = transport
        self._log = log
        self._active: dict[str, _ActiveRun] = {}
        self.tasks: set["asyncio.Task[None]"] = set()

    def active_run_ids(self) -> list[str]:
        """Ids of the runs still active (heartbeats report them)."""
        return list(self._active)

    def start(self, runner_name: str, ctx: RunContext, traceparent: Optional[str] = None) -> "asyncio.Task[None]":
        """Starts one run in its own task (which never raises). ``traceparent``: the RunRequest's
        W3C trace context; the run's host API calls carry it."""
        task = asyncio.ensure_future(self._run(runner_name, ctx, traceparent or None))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def _run(self, runner_name: str, ctx: RunContext, traceparent: Optional[str]) -> None:
        run_id = ctx["run_id"]
        if run_id in self._active:
            self._log("warn", "duplicate run request ignored", {"run_id": run_id})
            return
        results = RunResults(run_id, self._outbox)
        definition = self._runners.get(runner_name)
        if definition is None:
            await results.failed(f'this plugin has no runner named "{runner_name}"', code="runner.not_found")
            return
        deadline_at = (ctx.get("runtime") or {}).get("deadline_at")
        deadline = float(deadline_at) if isinstance(deadline_at, (int, float)) and deadline_at > 0 else None
        io = RunIO(ctx, results, None, self._log, deadline)  # type: ignore[arg-type]
        io.host = RunHostApi(
            self._transport,
            run_id,
            io.aborted,
            lambda: io.abort_reason or RunAbortedError("stopped", "aborted"),
            deadline,
            traceparent,
        )
        run = _ActiveRun(io, results)
        self._active[run_id] = run
        loop = asyncio.get_running_loop()
        if deadline is not None:
            run.timer = loop.call_later(
                max(0.0, deadline - time.time()),
                lambda: self._abort(run_id, RunAbortedError("deadline", "the run reached its deadline")),
            )
        run.task = asyncio.ensure_future(self._handle(definition, ctx, io, results))
        try:
            await asyncio.shield(run.task)
        except asyncio.CancelledError:
            pass  # the handler's task was cancelled by an abort: its terminal result is already out
        except Exception:
            pass
        finally:
            await io._close_bridges()
            self._finish(run_id, run)

    async def _handle(self, definition: Runner, ctx: RunContext, io: RunIO, results: RunResults) -> None:
        try:
            await definition.run(ctx, io)
            if not io.aborted.is_set():
                await results.completed()
        except asyncio.CancelledError:
            if not io.aborted.is_set():
                raise
        except Exception as err:  # noqa: BLE001 - a handler's failure fails its run only
            if io.aborted.is_set():
                return
            if await self._cancelled_meanwhile(err, io.host):
                # The host stops a run's calls when it cancels it, a moment before its cancel arrives.
                await results.failed("cancelled", code="cancelled")
                return
            self._log("warn", "run handler raised; the run fails", {"run_id": io.run_id, "error": repr(err)})
            await results.failed(
                err, code="runner.exception", retryable=err.retryable if isinstance(err, HostApiError) else False
            )

    def cancel(self, run_id: str, reason: str) -> None:
        """The host's cancel: run.failed (code cancelled) goes out at once, the handler is cancelled."""
        self._abort(run_id, RunAbortedError("cancelled", reason or "cancelled by the host"))

    def abort_all(self, kind: Literal["disconnected", "stopped"]) -> None:
        """Every run stops: ``disconnected`` sends nothing more (the stream is gone), ``stopped`` fails them."""
        for run_id in list(self._active):
            self._abort(
                run_id,
                RunAbortedError(kind, "the runner is stopping" if kind == "stopped" else "the connection to the host was lost"),
            )

    def _abort(self, run_id: str, reason: RunAbortedError) -> None:
        run = self._active.get(run_id)
        if run is None or run.io.aborted.is_set():
            return
        if reason.kind == "cancelled":
            run.results.failed(f"cancelled: {reason}", code="cancelled")
        elif reason.kind == "deadline":
            run.results.failed("the run reached its deadline", code="runner.timeout")
        elif reason.kind == "stopped":
            run.results.failed("the runner stopped", code="runner.stopped", retryable=True)
        else:
            run.results.close()
        run.io.abort_reason = reason
        run.io.aborted.set()
        self._finish(run_id, run)
        if run.task is not None and not run.task.done():
            run.task.cancel()

    async def _cancelled_meanwhile(self, err: BaseException, host: RunHostApi) -> bool:
        if not isinstance(err, HostApiError):
            return False
        try:
            return (await host.run.get()).get("cancel_requested") is True
        except Exception:  # noqa: BLE001
            return False

    def _finish(self, run_id: str, run: _ActiveRun) -> None:
        if run.timer is not None:
            run.timer.cancel()
        if self._active.get(run_id) is run:
            del self._active[run_id]
