"""The MCP bridge over HTTP, with the fake host: auth, initialize/session, tools/list of what the
run grants, tools/call through the host (reported in the run), refusals, notifications, close;
and over stdio: the relay command as a child process, and MCP served on a stream pair."""

import asyncio
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from runner_host_sdk import runner  # noqa: E402
from runner_host_sdk.testing import FakeHost  # noqa: E402


async def post(url, body, headers=None, method="POST"):
    """One HTTP/1.1 request on its own connection: (status, headers, body)."""
    hostport, path = url[len("http://"):].split("/", 1)
    host, port = hostport.split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    data = json.dumps(body).encode() if body is not None else b""
    head = [f"{method} /{path} HTTP/1.1", f"Host: {hostport}", f"Content-Length: {len(data)}", "Content-Type: application/json",
            "Accept: application/json, text/event-stream"]
    head += [f"{k}: {v}" for k, v in (headers or {}).items()]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    hdrs = {}
    while True:
        line = (await reader.readline()).decode()
        if line in ("\r\n", ""):
            break
        k, _, v = line.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    payload = await reader.readexactly(int(hdrs.get("content-length", "0")))
    writer.close()
    return status, hdrs, (json.loads(payload) if payload else None)


class McpBridgeTest(unittest.IsolatedAsyncioTestCase):
    async def test_bridge_serves_the_runs_grants_through_the_host(self):
        checks = {}
        opened = asyncio.Event()
        finish = asyncio.Event()

        @runner("agent", permissions={"tools": ["call"], "history": ["search"]})
        async def agent(ctx, io):
            async with io.mcp_bridge() as bridge:
                checks["bridge"] = bridge
                opened.set()
                await finish.wait()

        host = FakeHost(
            runners=[agent],
            tools={"add": lambda p: {"content": [{"type": "text", "text": str(p["a"] + p["b"])}], "structured_content": {"sum": p["a"] + p["b"]}}},
            knowledge_bases={"kb1": lambda q, k: [{"id": "d1", "content": q}]},
        )
        run = host.start("x")
        await opened.wait()
        bridge = checks["bridge"]
        auth = bridge.headers

        status, _, _ = await post(bridge.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        self.assertEqual(status, 401)
        status, _, _ = await post(bridge.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, {"Authorization": "Bearer wrong"})
        self.assertEqual(status, 401)
        status, _, _ = await post(bridge.url, None, auth, method="GET")
        self.assertEqual(status, 405)

        status, hdrs, body = await post(bridge.url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}, auth)
        self.assertEqual(status, 200)
        self.assertEqual(body["result"]["protocolVersion"], "2025-06-18")
        self.assertEqual(body["result"]["capabilities"], {"tools": {"listChanged": False}})
        session = {**auth, "Mcp-Session-Id": hdrs["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
        status, _, body = await post(bridge.url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        self.assertEqual((status, body), (202, None))
        status, _, _ = await post(bridge.url, {"jsonrpc": "2.0", "id": 2, "method": "ping"}, {**auth, "Mcp-Session-Id": "unknown"})
        self.assertEqual(status, 404)

        _, _, body = await post(bridge.url, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, session)
        self.assertEqual([t["name"] for t in body["result"]["tools"]], ["add", "knowledge_retrieve", "history_search"])

        _, _, body = await post(bridge.url, {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 2, "b": 3}}}, session)
        self.assertEqual(body["result"], {"content": [{"type": "text", "text": "5"}], "isError": False, "structuredContent": {"sum": 5}})
        _, _, body = await post(bridge.url, {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "knowledge_retrieve", "arguments": {"kb_id": "kb1", "query": "q"}}}, session)
        self.assertEqual(body["result"]["structuredContent"], {"results": [{"id": "d1", "content": "q"}]})
        _, _, body = await post(bridge.url, {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "http_fetch", "arguments": {}}}, session)
        self.assertEqual(body["error"]["code"], -32602)
        self.assertEqual(body["error"]["data"], {"code": "unauthorized"})
        _, _, body = await post(bridge.url, {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": 5}}, session)
        self.assertEqual(body["error"]["message"], "name: must be a non-empty string")
        _, _, body = await post(bridge.url, {"jsonrpc": "2.0", "id": 8, "method": "resources/list"}, session)
        self.assertEqual(body["error"]["code"], -32601)

        # Every call went through the host, with the run's id.
        calls = [(m, r.get("tool_name") or r.get("kb_id")) for m, r in host.calls]
        self.assertEqual(calls, [("CallTool", "add"), ("RetrieveKnowledge", "kb1"), ("CallTool", "http_fetch")])
        self.assertTrue(all(r["run_id"] == run.run_id for _, r in host.calls))

        # A keep-alive connection opened while the run is active...
        hostport = bridge.url[len("http://"):].split("/", 1)[0]
        reader, writer = await asyncio.open_connection(*hostport.split(":"))
        finish.set()
        outcome = await run.done
        types = [r["type"] for r in outcome.results]
        self.assertEqual(types, ["tool.call.started", "tool.call.completed", "tool.call.started", "tool.call.completed", "run.completed"])
        with self.assertRaises(OSError):
            await post(bridge.url, {"jsonrpc": "2.0", "id": 9, "method": "ping"}, auth)
        # ...is closed with the bridge: no answer on it.
        writer.write(b"POST /mcp HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
        self.assertEqual(await reader.read(), b"")
        writer.close()

    async def test_the_bridge_closes_when_the_run_is_cancelled(self):
        opened = asyncio.Event()
        holder = {}

        @runner("agent")
        async def agent(ctx, io):
            holder["bridge"] = await io.mcp_bridge().start()  # no `async with`: the run's end closes it
            opened.set()
            await asyncio.sleep(60)

        host = FakeHost(runners=[agent])
        run = host.start("x")
        await opened.wait()
        status, _, _ = await post(holder["bridge"].url, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, holder["bridge"].headers)
        self.assertEqual(status, 200)
        host.cancel(run.run_id)
        await run.done
        for _ in range(100):
            if holder["bridge"]._server is None:
                break
            await asyncio.sleep(0.01)
        with self.assertRaises(OSError):
            await post(holder["bridge"].url, {"jsonrpc": "2.0", "id": 2, "method": "ping"}, holder["bridge"].headers)


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def add_tool(p):
    return {"content": [{"type": "text", "text": str(p["a"] + p["b"])}], "is_error": False}


class StdioTest(unittest.IsolatedAsyncioTestCase):
    async def open_bridge(self):
        """A run holding its bridge open until ``finish`` is set: (host, run, bridge, finish)."""
        opened, finish, holder = asyncio.Event(), asyncio.Event(), {}

        @runner("agent", permissions={"tools": ["call"]})
        async def agent(ctx, io):
            async with io.mcp_bridge(name="rh") as bridge:
                holder["bridge"] = bridge
                opened.set()
                await finish.wait()

        host = FakeHost(runners=[agent], tools={"add": add_tool})
        run = host.start("x")
        await opened.wait()
        return host, run, holder["bridge"], finish

    async def test_the_stdio_relay_command_serves_the_bridge_to_a_child(self):
        host, run, bridge, finish = await self.open_bridge()
        entry = bridge.stdio
        self.assertEqual((entry["name"], entry["command"], entry["args"][0]), ("rh", sys.executable, "-c"))
        self.assertEqual(entry["env"], {"RUNNERHOST_MCP_URL": bridge.url, "RUNNERHOST_MCP_SECRET": bridge.secret})
        self.assertEqual(bridge.http, {"name": "rh", "url": bridge.url, "headers": bridge.headers})
        child = await asyncio.create_subprocess_exec(
            entry["command"], *entry["args"], env={**os.environ, **entry["env"]},
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )
        messages = [
            INIT,
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 2, "b": 5}}},
            {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "http_fetch", "arguments": {}}},
        ]
        answers = {}
        for m in messages:  # one at a time, as a client does after initialize
            child.stdin.write((json.dumps(m) + "\n").encode())
            await child.stdin.drain()
            if "id" in m:
                answer = json.loads(await asyncio.wait_for(child.stdout.readline(), 20))
                answers[answer["id"]] = answer
        child.stdin.write(b"not json\n")
        await child.stdin.drain()
        parse_error = json.loads(await asyncio.wait_for(child.stdout.readline(), 20))
        self.assertEqual(answers[1]["result"]["serverInfo"]["name"], "rh")
        self.assertEqual([t["name"] for t in answers[2]["result"]["tools"]], ["add"])
        self.assertEqual(answers[3]["result"]["content"], [{"type": "text", "text": "7"}])
        self.assertEqual(answers[4]["error"]["data"], {"code": "unauthorized"})
        self.assertEqual(parse_error["error"]["code"], -32700)
        self.assertEqual([(m, r.get("tool_name")) for m, r in host.calls], [("CallTool", "add"), ("CallTool", "http_fetch")])

        # Once the run has ended, the relay answers each request with an error, and ends with its stdin.
        finish.set()
        await run.done
        child.stdin.write((json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping"}) + "\n").encode())
        child.stdin.close()
        late = json.loads(await asyncio.wait_for(child.stdout.readline(), 20))
        self.assertEqual(late["id"], 5)
        self.assertIn("unreachable", late["error"]["message"])
        self.assertEqual(await asyncio.wait_for(child.wait(), 20), 0)

    async def test_serve_answers_mcp_on_a_stream_pair(self):
        host, run, bridge, finish = await self.open_bridge()

        class Collect:
            def __init__(self):
                self.lines = []

            def write(self, data):
                self.lines.extend(json.loads(line) for line in data.decode().splitlines())

            async def drain(self):
                pass

        reader, writer = asyncio.StreamReader(), Collect()
        for m in [
            INIT,
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 1}}},
        ]:
            reader.feed_data((json.dumps(m) + "\n").encode())
        reader.feed_data(b"\n{broken\n")
        reader.feed_eof()
        await asyncio.wait_for(bridge.serve(reader, writer), 20)
        by_id = {m["id"]: m for m in writer.lines}
        self.assertEqual(len(writer.lines), 3)  # the notification has no answer
        self.assertEqual(by_id[1]["result"]["capabilities"], {"tools": {"listChanged": False}})
        self.assertEqual(by_id[2]["result"]["content"], [{"type": "text", "text": "2"}])
        self.assertEqual(by_id[None]["error"]["code"], -32700)
        finish.set()
        await run.done
        with self.assertRaises(Exception) as closed:
            await bridge.serve(asyncio.StreamReader(), writer)
        self.assertIn("closed", str(closed.exception))

    def test_entries_need_a_started_bridge(self):
        from runner_host_sdk.mcp import McpBridge

        bridge = McpBridge(object())  # type: ignore[arg-type]
        with self.assertRaisesRegex(RuntimeError, "not started"):
            bridge.stdio


if __name__ == "__main__":
    unittest.main()
