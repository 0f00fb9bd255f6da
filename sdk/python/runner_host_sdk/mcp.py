"""The run-scoped MCP bridge: an MCP server (Streamable HTTP, protocol revisions 2024-11-05 to
2025-11-25) on 127.0.0.1 with a per-run bearer secret, for an external executor (a coding agent,
a CLI) working for one run; for an executor that launches stdio MCP servers, a stdio relay
command (``bridge.stdio``) and MCP over any stream pair (``bridge.serve(reader, writer)``), as the
TypeScript SDK offers (libs/runner-sdk/src/mcp-bridge.ts). It exposes exactly what the run's snapshot grants: the granted host
tools, knowledge retrieval over the granted knowledge bases, history search/page when those APIs
are available. Every call goes through the host API with the run's identity (so the host checks
and audits it); it closes when the run ends. See sdk/python/README.md#the-mcp-bridge.

Implemented by hand (no Python MCP library is available here): POST carries one JSON-RPC message;
requests are answered with one application/json response, notifications and responses with 202;
GET (no server-initiated stream) and unknown paths are refused; DELETE ends the session. Over
stdio, messages are newline-delimited JSON-RPC (the MCP stdio transport).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import secrets
import sys
from typing import TYPE_CHECKING, Any, Optional, Protocol

from .errors import HostApiError, RunAbortedError

if TYPE_CHECKING:
    from .runner import RunIO

SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
PATH = "/mcp"
MAX_BODY = 4 * 1024 * 1024

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
RUN_ENDED = -32000


# Relays newline-delimited JSON-RPC on stdin to the bridge's HTTP endpoint and its answers to
# stdout: plain Python 3 standard library for ``python3 -c``, so the child needs nothing installed
# (the TypeScript SDK's STDIO_RELAY does the same with node). Each request is sent in its own
# thread (a slow tool call does not hold up a ping); the session id of initialize is kept.
STDIO_RELAY = r"""
import json, os, sys, threading, urllib.error, urllib.request
url = os.environ["RUNNERHOST_MCP_URL"]
auth = "Bearer " + os.environ["RUNNERHOST_MCP_SECRET"]
lock = threading.Lock()
session = {}
def out(m):
    with lock:
        sys.stdout.write(json.dumps(m) + "\n")
        sys.stdout.flush()
def fail(rid, message):
    if rid is not None:
        out({"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": message}})
def send(line):
    try:
        m = json.loads(line)
    except ValueError:
        out({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}})
        return
    rid = m.get("id") if isinstance(m, dict) else None
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", "authorization": auth}
    if "id" in session:
        headers["mcp-session-id"] = session["id"]
    request = urllib.request.Request(url, data=line.encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=3600) as r:
            if r.headers.get("mcp-session-id"):
                session["id"] = r.headers["mcp-session-id"]
            body = r.read()
        if body:
            answer = json.loads(body)
            for a in answer if isinstance(answer, list) else [answer]:
                out(a)
    except urllib.error.HTTPError as e:
        fail(rid, "runner host MCP bridge: HTTP %d %s" % (e.code, e.read()[:200].decode("utf-8", "replace")))
    except Exception as e:
        fail(rid, "runner host MCP bridge unreachable (the run has ended?): %s" % e)
threads = []
for line in sys.stdin:
    line = line.strip()
    if line:
        t = threading.Thread(target=send, args=(line,))
        t.start()
        threads.append(t)
for t in threads:
    t.join()
"""


class StreamWriterLike(Protocol):
    """What ``McpBridge.serve`` writes to: an asyncio.StreamWriter (a child's stdin) or the like."""

    def write(self, data: bytes) -> Any: ...

    async def drain(self) -> None: ...


class _JsonRpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


class McpBridge:
    """``async with io.mcp_bridge() as bridge:`` then hand ``bridge.url`` and ``bridge.headers``
    (or ``bridge.client_config()``) to the executor. ``report=True`` (default) reports each tool
    call in the run's results (tool.call.started / tool.call.completed), like io.tool_call()."""

    def __init__(self, io: "RunIO", *, host: str = "127.0.0.1", port: int = 0, report: bool = True, name: str = "runner-host") -> None:
        self._io = io
        self._bind = (host, port)
        self._report = report
        self._name = name
        self.secret = secrets.token_urlsafe(32)
        self.url = ""
        self._server: Optional[asyncio.base_events.Server] = None
        self._sessions: set[str] = set()
        self._connections: set[asyncio.StreamWriter] = set()
        self._closed = False
        self.calls = 0

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secret}"}

    def client_config(self) -> dict[str, Any]:
        """The server entry an MCP client configuration takes (``mcpServers.<name>``)."""
        return {"type": "http", "url": self.url, "headers": self.headers}

    @property
    def http(self) -> dict[str, Any]:
        """The HTTP endpoint as a named MCP server entry: ``{name, url, headers}``."""
        self._require_started()
        return {"name": self._name, "url": self.url, "headers": self.headers}

    @property
    def stdio(self) -> dict[str, Any]:
        """A stdio MCP server entry ``{name, command, args, env}`` for a child that launches its
        MCP servers itself: this Python running ``-c <relay>``, which relays stdio JSON-RPC to the
        HTTP endpoint (the URL and secret in ``env``: RUNNERHOST_MCP_URL, RUNNERHOST_MCP_SECRET).
        The child's env must keep them (merge them into whatever environment it gets)."""
        self._require_started()
        return {
            "name": self._name,
            "command": sys.executable or "python3",
            "args": ["-c", STDIO_RELAY],
            "env": {"RUNNERHOST_MCP_URL": self.url, "RUNNERHOST_MCP_SECRET": self.secret},
        }

    def _require_started(self) -> None:
        if not self.url:
            raise RuntimeError("the bridge is not started: use `async with io.mcp_bridge() as bridge`")

    async def serve(self, reader: asyncio.StreamReader, writer: StreamWriterLike) -> None:
        """Serves MCP over a stream pair (newline-delimited JSON-RPC), e.g. a child's stdout and
        stdin, until the reader ends or the bridge closes. Requests are answered concurrently."""
        if self._closed:
            raise RunAbortedError("stopped", "the MCP bridge is closed (the run has ended)")
        lock = asyncio.Lock()
        pending: set["asyncio.Task[None]"] = set()

        async def send(message: Any) -> None:
            async with lock:
                writer.write((json.dumps(message) + "\n").encode())
                await writer.drain()

        async def answer(message: Any) -> None:
            response = await self.handle(message)
            if response is not None and not self._closed:
                await send(response)

        try:
            while not self._closed:
                line = await reader.readline()
                if not line:
                    break
                if not line.strip():
                    continue
                try:
                    message = json.loads(line)
                except ValueError:
                    await send(_error(None, PARSE_ERROR, "not JSON"))
                    continue
                task = asyncio.ensure_future(answer(message))
                pending.add(task)
                task.add_done_callback(pending.discard)
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        finally:
            for task in pending:
                task.cancel()

    async def start(self) -> "McpBridge":
        if self._closed:
            raise RuntimeError("the bridge is closed (its run has ended)")
        if self._server is None:
            self._server = await asyncio.start_server(self._connection, self._bind[0], self._bind[1])
            port = self._server.sockets[0].getsockname()[1]
            self.url = f"http://{self._bind[0]}:{port}{PATH}"
        return self

    async def close(self) -> None:
        self._closed = True
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._connections):  # keep-alive connections end with the bridge too
            writer.close()
        self._connections.clear()

    async def __aenter__(self) -> "McpBridge":
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # ---- what the run grants ----

    def _tools(self) -> dict[str, dict[str, Any]]:
        ctx = self._io.ctx
        resources = ctx.get("resources") or {}
        tools: dict[str, dict[str, Any]] = {}
        for t in resources.get("tools") or []:
            name = t.get("tool_name")
            if not name:
                continue
            entry: dict[str, Any] = {
                "name": name,
                "description": t.get("description") or "",
                "inputSchema": t.get("parameters") or {"type": "object", "properties": {}},
            }
            if t.get("title"):
                entry["title"] = t["title"]
            if t.get("annotations"):
                entry["annotations"] = t["annotations"]
            tools[name] = {"kind": "tool", "def": entry}
        kbs = [kb["kb_id"] for kb in resources.get("knowledge_bases") or [] if kb.get("kb_id")]
        if kbs and "knowledge_retrieve" not in tools:
            tools["knowledge_retrieve"] = {
                "kind": "knowledge",
                "def": {
                    "name": "knowledge_retrieve",
                    "description": "Retrieve passages from a knowledge base granted to this run.",
                    "inputSchema": {
                        "type": "object",
                        "properties": {
                            "kb_id": {"type": "string", "enum": kbs},
                            "query": {"type": "string"},
                            "top_k": {"type": "integer", "minimum": 1},
                        },
                        "required": ["kb_id", "query"],
                    },
                },
            }
        apis = (ctx.get("context") or {}).get("available_apis") or {}
        if apis.get("history_search") and "history_search" not in tools:
            tools["history_search"] = {
                "kind": "history_search",
                "def": {
                    "name": "history_search",
                    "description": "Search this conversation's history.",
                    "inputSchema": {
                        "type": "object",
                        "properties": {"query": {"type": "string"}, "top_k": {"type": "integer", "minimum": 1}},
                        "required": ["query"],
                    },
                },
            }
        if apis.get("history_page") and "history_page" not in tools:
            tools["history_page"] = {
                "kind": "history_page",
                "def": {
                    "name": "history_page",
                    "description": "Read this conversation's history, newest first.",
                    "inputSchema": {
                        "type": "object",
                        "properties": {"before_cursor": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
                    },
                },
            }
        return tools

    # ---- JSON-RPC ----

    async def handle(self, message: Any) -> Optional[dict[str, Any]]:
        """One JSON-RPC message in; the response out (None for a notification or a response)."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _error(None, INVALID_REQUEST, "not a JSON-RPC 2.0 message")
        method = message.get("method")
        if "id" not in message:
            return None  # a notification (notifications/initialized, cancelled, ...) or a response
        rid = message["id"]
        if not isinstance(method, str):
            return _error(rid, INVALID_REQUEST, "method: must be a string")
        params = message.get("params") or {}
        if not isinstance(params, dict):
            return _error(rid, INVALID_PARAMS, "params: must be an object")
        try:
            return {"jsonrpc": "2.0", "id": rid, "result": await self._dispatch(method, params)}
        except _JsonRpcError as e:
            return _error(rid, e.code, e.message, e.data)

    async def _dispatch(self, method: str, params: dict[str, Any]) -> Any:
        if method == "initialize":
            asked = params.get("protocolVersion")
            return {
                "protocolVersion": asked if asked in SUPPORTED_VERSIONS else SUPPORTED_VERSIONS[0],
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": self._name, "version": "1.0.0"},
                "instructions": f"Tools of run {self._io.run_id}, served by its runner through the host.",
            }
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": [t["def"] for t in self._tools().values()]}
        if method == "tools/call":
            return await self._call(params)
        raise _JsonRpcError(METHOD_NOT_FOUND, f"method not found: {method}")

    async def _call(self, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        args = params.get("arguments") or {}
        if not isinstance(name, str) or not name:
            raise _JsonRpcError(INVALID_PARAMS, "name: must be a non-empty string")
        if not isinstance(args, dict):
            raise _JsonRpcError(INVALID_PARAMS, "arguments: must be an object")
        self.calls += 1
        spec = self._tools().get(name, {"kind": "tool"})  # not granted: the host refuses and audits it
        host = self._io.host
        try:
            if spec["kind"] == "knowledge":
                results = await host.knowledge.retrieve(str(args.get("kb_id", "")), str(args.get("query", "")), top_k=args.get("top_k"))
                return _json_result({"results": results})
            if spec["kind"] == "history_search":
                return _json_result(await host.history.search(str(args.get("query", "")), top_k=args.get("top_k")))
            if spec["kind"] == "history_page":
                return _json_result(await host.history.page(before_cursor=args.get("before_cursor"), limit=args.get("limit")))
            result = await (self._io.tool_call(name, args) if self._report else host.tools.call(name, args))
        except RunAbortedError as e:
            raise _JsonRpcError(RUN_ENDED, f"the run has ended: {e}") from None
        except HostApiError as e:
            if e.code in ("unauthorized", "not_found", "invalid_argument"):
                # Not granted to this run (or no such tool): a protocol error, as for an unknown tool.
                raise _JsonRpcError(INVALID_PARAMS, str(e), {"code": e.code}) from None
            return {"content": [{"type": "text", "text": str(e)}], "isError": True}
        return _tool_result(result)

    # ---- HTTP/1.1 ----

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(writer)
        try:
            while not self._closed:
                request = await _read_request(reader)
                if request is None or self._closed:
                    break
                status, headers, body = await self._http(*request)
                _write_response(writer, status, headers, body)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            self._connections.discard(writer)
            writer.close()

    async def _http(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        if path.split("?", 1)[0] != PATH:
            return 404, {}, b""
        origin = headers.get("origin")
        if origin and not origin.startswith(("http://127.0.0.1", "http://localhost", "http://[::1]")):
            return 403, {}, b""  # DNS rebinding: only loopback pages may call the bridge
        auth = headers.get("authorization", "")
        if not hmac.compare_digest(auth.encode(), f"Bearer {self.secret}".encode()):
            return 401, {"WWW-Authenticate": 'Bearer realm="runner-host-mcp-bridge"'}, b""
        if method == "DELETE":
            self._sessions.discard(headers.get("mcp-session-id", ""))
            return 200, {}, b""
        if method != "POST":
            return 405, {"Allow": "POST, DELETE"}, b""
        try:
            message = json.loads(body)
        except ValueError:
            return _json(400, _error(None, PARSE_ERROR, "body: not JSON"))
        session = headers.get("mcp-session-id")
        extra: dict[str, str] = {}
        if isinstance(message, dict) and message.get("method") == "initialize":
            session = secrets.token_hex(16)
            self._sessions.add(session)
            extra["Mcp-Session-Id"] = session
        elif session is not None and session not in self._sessions:
            return 404, {}, b""
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in SUPPORTED_VERSIONS:
            return _json(400, _error(None, INVALID_REQUEST, f"MCP-Protocol-Version: unsupported {version}"))
        response = await self.handle(message)
        if response is None:
            return 202, extra, b""
        status, hdrs, data = _json(200, response)
        return status, {**hdrs, **extra}, data


def _error(rid: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": error}


def _json_result(value: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": json.dumps(value)}], "structuredContent": value if isinstance(value, dict) else {"value": value}}


def _tool_result(result: dict[str, Any]) -> dict[str, Any]:
    """A host tool result as an MCP CallToolResult (host results are MCP-shaped, snake_case)."""
    if isinstance(result.get("content"), list):
        out: dict[str, Any] = {"content": result["content"], "isError": bool(result.get("is_error") or result.get("isError"))}
        structured = result.get("structured_content", result.get("structuredContent"))
        if isinstance(structured, dict):
            out["structuredContent"] = structured
        return out
    return _json_result(result)


def _json(status: int, value: Any) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps(value).encode()


async def _read_request(reader: asyncio.StreamReader) -> Optional[tuple[str, str, dict[str, str], bytes]]:
    line = await reader.readline()
    if not line:
        return None
    parts = line.decode("latin-1").strip().split(" ")
    if len(parts) != 3:
        raise ValueError("bad request line")
    headers: dict[str, str] = {}
    while True:
        h = (await reader.readline()).decode("latin-1")
        if h in ("\r\n", "\n", ""):
            break
        key, _, value = h.partition(":")
        headers[key.strip().lower()] = value.strip()
    body = b""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readline()
                break
            if len(body) + size > MAX_BODY:
                raise ValueError("body too large")
            body += await reader.readexactly(size)
            await reader.readline()
    else:
        length = int(headers.get("content-length", "0") or "0")
        if length > MAX_BODY:
            raise ValueError("body too large")
        body = await reader.readexactly(length) if length else b""
    return parts[0], parts[1], headers, body


REASONS = {200: "OK", 202: "Accepted", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed"}


def _write_response(writer: asyncio.StreamWriter, status: int, headers: dict[str, str], body: bytes) -> None:
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}", f"Content-Length: {len(body)}", "Connection: keep-alive"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
