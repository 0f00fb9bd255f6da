"""The plugin against an in-process fake gateway (a grpc.aio server speaking RunnerGatewayService):
hello/welcome with manifests, heartbeats, ping/pong, results in frames, cancel, reconnect after
the server restarts (runs in flight aborted, new runs arrive), refusal is final, graceful stop."""

import asyncio
import os
import socket
import sys
import unittest

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from runner_host_sdk import PluginRefusedError, Reconnect, RunnerPlugin, runner  # noqa: E402
from runner_host_sdk._proto.runnerhost.v1 import context_pb2, gateway_pb2, gateway_pb2_grpc, host_api_pb2, host_api_pb2_grpc  # noqa: E402
from runner_host_sdk.wire import dict_to_message, from_struct, to_struct  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeGateway(gateway_pb2_grpc.RunnerGatewayServiceServicer):
    def __init__(self, refuse=False):
        self.refuse = refuse
        self.hellos = []
        self.metadata = []
        self.received = []  # PluginMessage kinds and payloads
        self.outgoing: asyncio.Queue = asyncio.Queue()
        self.connected = asyncio.Event()
        self.message = asyncio.Event()

    async def Connect(self, request_iterator, context):
        if self.refuse:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "bad token")
        self.metadata.append(dict(context.invocation_metadata()))
        first = await request_iterator.__anext__()
        self.hellos.append(first.hello)
        yield gateway_pb2.HostMessage(
            welcome=gateway_pb2.Welcome(
                session_id="s1",
                protocol_version="1",
                runners=[gateway_pb2.AcceptedRunner(runner_id=f"plugin:t/p/{m['name']}", name=m["name"]) for m in map(from_struct, first.hello.manifests)],
                heartbeat_interval_ms=50,
            )
        )
        self.connected.set()

        async def read():
            async for m in request_iterator:
                self.received.append(m)
                self.message.set()

        reader = asyncio.ensure_future(read())
        try:
            while True:
                out = await self.outgoing.get()
                if out is None:
                    return
                yield out
        finally:
            reader.cancel()

    def results(self):
        out = []
        for m in self.received:
            kind = m.WhichOneof("msg")
            if kind == "result":
                out.append(m.result)
            elif kind == "results":
                out.extend(m.results.results)
        return out

    async def wait_for(self, predicate, timeout=10):
        async def loop():
            while not predicate():
                self.message.clear()
                await self.message.wait()

        await asyncio.wait_for(loop(), timeout)


class FakeHostApi(host_api_pb2_grpc.HostApiServiceServicer):
    """Records the metadata of each host API call: (method, authorization, traceparent)."""

    def __init__(self):
        self.calls = []

    def _record(self, method, context):
        md = dict(context.invocation_metadata())
        self.calls.append((method, md.get("authorization"), md.get("traceparent")))

    async def CallTool(self, request, context):
        self._record("CallTool", context)
        return host_api_pb2.CallToolResponse(result=to_struct({"content": [{"type": "text", "text": "ok"}], "is_error": False}))

    async def StreamModel(self, request, context):
        self._record("StreamModel", context)
        yield host_api_pb2.StreamModelChunk(chunk=to_struct({"role": "assistant", "content": "hi", "msg_sequence": 1}))


async def until(predicate, timeout=10):
    async def loop():
        while not predicate():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(loop(), timeout)


def run_request(run_id, runner_name="default"):
    return gateway_pb2.HostMessage(
        run=gateway_pb2.RunRequest(
            runner_id=f"plugin:t/p/{runner_name}",
            runner_name=runner_name,
            context=dict_to_message(context_pb2.RunContext, {"run_id": run_id, "input": {"text": "hello"}}),
        )
    )


@runner("default", capabilities={"streaming": True})
async def talker(ctx, io):
    await io.delta("hel")
    await io.delta("lo")
    if ctx["input"]["text"] == "hang":
        await asyncio.sleep(60)


class PluginTest(unittest.IsolatedAsyncioTestCase):
    async def start_server(self, gateway, port, host_api=None):
        server = grpc.aio.server()
        gateway_pb2_grpc.add_RunnerGatewayServiceServicer_to_server(gateway, server)
        if host_api is not None:
            host_api_pb2_grpc.add_HostApiServiceServicer_to_server(host_api, server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        return server

    async def test_hello_results_heartbeat_ping_cancel_and_reconnect(self):
        port = free_port()
        gw = FakeGateway()
        server = await self.start_server(gw, port)
        plugin = RunnerPlugin(
            url=f"127.0.0.1:{port}", token="tok", author="t", plugin="p", runners=[talker],
            reconnect=Reconnect(initial_delay_ms=20, max_delay_ms=100), log=lambda *a: None,
        )
        try:
            welcome = await plugin.start()
            self.assertEqual(welcome.runners, [{"runner_id": "plugin:t/p/default", "name": "default"}])
            self.assertEqual(gw.metadata[0]["authorization"], "Bearer tok")
            hello = gw.hellos[0]
            self.assertEqual((hello.plugin_author, hello.plugin_name, hello.protocol_version), ("t", "p", "1"))
            self.assertEqual(from_struct(hello.manifests[0])["id"], "plugin:t/p/default")

            await gw.outgoing.put(run_request("r1"))
            await gw.outgoing.put(gateway_pb2.HostMessage(ping=gateway_pb2.Ping(nonce=7)))
            await gw.wait_for(lambda: any(r.type == "run.completed" for r in gw.results()))
            got = [(r.run_id, r.sequence, r.type) for r in gw.results()]
            self.assertEqual([t for _, _, t in got], ["message.delta", "message.delta", "message.completed", "run.completed"])
            self.assertEqual([s for _, s, _ in got], [1, 2, 3, 4])
            await gw.wait_for(lambda: any(m.WhichOneof("msg") == "pong" and m.pong.nonce == 7 for m in gw.received))
            await gw.wait_for(lambda: any(m.WhichOneof("msg") == "heartbeat" for m in gw.received))

            # A run in flight, then its cancel: run.failed (cancelled) at once.
            hang = run_request("r2")
            hang.run.context.input.text = "hang"
            await gw.outgoing.put(hang)
            await gw.wait_for(lambda: any(r.run_id == "r2" for r in gw.results()))
            await gw.wait_for(lambda: any(m.WhichOneof("msg") == "heartbeat" and "r2" in m.heartbeat.active_run_ids for m in gw.received))
            await gw.outgoing.put(gateway_pb2.HostMessage(cancel=gateway_pb2.CancelRun(run_id="r2", reason="user left")))
            await gw.wait_for(lambda: any(r.run_id == "r2" and r.type == "run.failed" for r in gw.results()))
            failed = [r for r in gw.results() if r.run_id == "r2" and r.type == "run.failed"][0]
            self.assertEqual(from_struct(failed.data), {"error": "cancelled: user left", "code": "cancelled", "retryable": False})

            # A run in flight when the server goes away: aborted (nothing sent); the plugin reconnects.
            hang3 = run_request("r3")
            hang3.run.context.input.text = "hang"
            await gw.outgoing.put(hang3)
            await gw.wait_for(lambda: any(r.run_id == "r3" for r in gw.results()))
            await server.stop(None)
            gw2 = FakeGateway()
            server = await self.start_server(gw2, port)
            await asyncio.wait_for(gw2.connected.wait(), 10)
            await until(lambda: plugin.connections == 2)  # the plugin has read the new welcome
            await gw2.outgoing.put(run_request("r4"))
            await gw2.wait_for(lambda: any(r.type == "run.completed" for r in gw2.results()))
            self.assertFalse(any(r.run_id == "r3" for r in gw2.results()))
        finally:
            await plugin.stop()
            await server.stop(None)

    async def test_host_api_calls_carry_the_runs_traceparent(self):
        port = free_port()
        gw, api = FakeGateway(), FakeHostApi()
        server = await self.start_server(gw, port, api)

        @runner("traced")
        async def traced(ctx, io):
            await io.host.tools.call("t", {})
            await io.host.models.stream("m", "hi").collect()

        plugin = RunnerPlugin(url=f"127.0.0.1:{port}", token="tok", author="t", plugin="p", runners=[traced], log=lambda *a: None)
        traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        try:
            await plugin.start()
            with_trace = run_request("r1", "traced")
            with_trace.run.traceparent = traceparent
            await gw.outgoing.put(with_trace)
            await gw.wait_for(lambda: any(r.run_id == "r1" and r.type == "run.completed" for r in gw.results()))
            await gw.outgoing.put(run_request("r2", "traced"))  # a run without trace context sends none
            await gw.wait_for(lambda: any(r.run_id == "r2" and r.type == "run.completed" for r in gw.results()))
            self.assertEqual(
                api.calls,
                [
                    ("CallTool", "Bearer tok", traceparent),
                    ("StreamModel", "Bearer tok", traceparent),
                    ("CallTool", "Bearer tok", None),
                    ("StreamModel", "Bearer tok", None),
                ],
            )
        finally:
            await plugin.stop()
            await server.stop(None)

    async def test_refusal_is_final(self):
        port = free_port()
        server = await self.start_server(FakeGateway(refuse=True), port)
        plugin = RunnerPlugin(url=f"127.0.0.1:{port}", token="bad", author="t", plugin="p", runners=[talker], log=lambda *a: None)
        try:
            with self.assertRaises(PluginRefusedError) as caught:
                await plugin.start()
            self.assertEqual(caught.exception.grpc_status, grpc.StatusCode.UNAUTHENTICATED)
        finally:
            await plugin.stop()
            await server.stop(None)

    async def test_stop_fails_runs_in_flight_as_retryable(self):
        port = free_port()
        gw = FakeGateway()
        server = await self.start_server(gw, port)
        plugin = RunnerPlugin(url=f"127.0.0.1:{port}", token="tok", author="t", plugin="p", runners=[talker], log=lambda *a: None)
        try:
            await plugin.start()
            hang = run_request("r1")
            hang.run.context.input.text = "hang"
            await gw.outgoing.put(hang)
            await gw.wait_for(lambda: any(r.run_id == "r1" for r in gw.results()))
            stopping = asyncio.ensure_future(plugin.stop())
            await gw.wait_for(lambda: any(r.type == "run.failed" for r in gw.results()))
            failed = [r for r in gw.results() if r.type == "run.failed"][0]
            self.assertEqual(from_struct(failed.data)["code"], "runner.stopped")
            self.assertTrue(from_struct(failed.data)["retryable"])
            await gw.outgoing.put(None)
            await stopping
        finally:
            await server.stop(None)

    def test_options_are_checked_by_name(self):
        with self.assertRaisesRegex(ValueError, "^token: "):
            RunnerPlugin(url="x", token="", author="a", plugin="p", runners=[talker])
        with self.assertRaisesRegex(ValueError, "^runners: "):
            RunnerPlugin(url="x", token="t", author="a", plugin="p", runners=[])


if __name__ == "__main__":
    unittest.main()
