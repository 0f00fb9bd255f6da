"""A runner plugin: one RunnerGatewayService/Connect stream per connection (docs/protocol.md).

plugin -> host: hello (first), then results / heartbeat / pong; host -> plugin: welcome, then
run / cancel / ping. The plugin reconnects with capped exponential backoff and jitter whenever
the stream is lost (runs in flight are aborted, the host decides their end; new runs arrive on
the new stream). A refusal (UNAUTHENTICATED, PERMISSION_DENIED) is final.
"""

from __future__ import annotations

import asyncio
import os
import random as _random
import signal
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import grpc

from ._proto.runnerhost.v1 import gateway_pb2, gateway_pb2_grpc
from .errors import PluginRefusedError
from .host_api import GrpcHostApiTransport
from .results import DEFAULT_MAX_BATCH, DEFAULT_MAX_FRAME_BYTES, Outbox
from .runner import Logger, Runner, RunDispatcher, manifest_of, stderr_logger
from .types import RunResult, Welcome
from .wire import dict_to_message, message_to_dict, to_struct

PROTOCOL_VERSION = "1"
CHANNEL_OPTIONS = [("grpc.enable_retries", 0)]


@dataclass(frozen=True)
class Reconnect:
    initial_delay_ms: int = 250
    max_delay_ms: int = 5000
    #: Random share taken off each delay, 0..1: a delay is 50-100 % of the backoff at 0.5.
    jitter: float = 0.5


def backoff_delay(attempt: int, options: Reconnect = Reconnect(), random: Callable[[], float] = _random.random) -> float:
    """Delay in ms before reconnect attempt ``attempt`` (0-based): capped exponential backoff with jitter."""
    jitter = min(1.0, max(0.0, options.jitter))
    backoff = min(options.max_delay_ms, options.initial_delay_ms * 2 ** min(attempt, 30))
    return round(backoff * (1 - jitter * random()))


def _result_message(result: RunResult) -> gateway_pb2.RunResult:
    message = gateway_pb2.RunResult(run_id=result["run_id"], type=result["type"])
    to_struct(result["data"], message.data)
    if result.get("usage"):
        to_struct(result["usage"], message.usage)
    if "sequence" in result:
        message.sequence = result["sequence"]
    if "timestamp" in result:
        message.timestamp = result["timestamp"]
    return message


class _Session:
    """One connection: one Connect stream."""

    def __init__(self, plugin: "RunnerPlugin", stub: gateway_pb2_grpc.RunnerGatewayServiceStub) -> None:
        self._plugin = plugin
        self.welcomed = False
        self.closed = False
        self._write_lock = asyncio.Lock()
        self._heartbeat: Optional[asyncio.Task[None]] = None
        self.outbox = Outbox(self._write_frame, plugin.max_batch, plugin.max_frame_bytes)
        self.dispatcher = RunDispatcher(plugin.runners, self.outbox, plugin._transport, plugin.log)
        self.call = stub.Connect(metadata=(("authorization", f"Bearer {plugin.token}"),))

    async def run(self) -> tuple[grpc.StatusCode, str]:
        p = self._plugin
        hello = gateway_pb2.Hello(
            plugin_author=p.author, plugin_name=p.plugin, plugin_version=p.version, protocol_version=PROTOCOL_VERSION
        )
        for r in p.runners:
            to_struct(manifest_of(r, p.author, p.plugin), hello.manifests.add())
        await self._write(gateway_pb2.PluginMessage(hello=hello))
        try:
            async for message in self.call:
                self._on_message(message)
        except grpc.aio.AioRpcError:
            pass  # the status below says why
        except asyncio.CancelledError:
            self.call.cancel()
            raise
        finally:
            self._shut_down("disconnected")
        code = await self.call.code()
        details = await self.call.details()
        return code, details or ""

    def _on_message(self, message: gateway_pb2.HostMessage) -> None:
        kind = message.WhichOneof("msg")
        if kind == "welcome":
            self._on_welcome(Welcome(**message_to_dict(message.welcome)))
        elif kind == "ping":
            asyncio.ensure_future(self._write(gateway_pb2.PluginMessage(pong=gateway_pb2.Pong(nonce=message.ping.nonce))))
        elif kind == "run":
            run = message.run
            if not run.HasField("context") or not run.context.run_id:
                self._plugin.log("error", "run request without context.run_id ignored", {"runner_id": run.runner_id})
                return
            self.dispatcher.start(run.runner_name, message_to_dict(run.context), run.traceparent)  # type: ignore[arg-type]
        elif kind == "cancel":
            self.dispatcher.cancel(message.cancel.run_id, message.cancel.reason)

    def _on_welcome(self, welcome: Welcome) -> None:
        self.welcomed = True
        for rejected in welcome.rejected:
            self._plugin.log("warn", "the host rejected a manifest", dict(rejected))
        self._plugin.log("info", "connected", {"runners": [r["runner_id"] for r in welcome.runners]})
        if welcome.heartbeat_interval_ms > 0 and self._heartbeat is None:
            self._heartbeat = asyncio.ensure_future(self._beat(welcome.heartbeat_interval_ms / 1000))
        self._plugin._on_welcome(welcome)

    async def _beat(self, interval: float) -> None:
        while not self.closed:
            await asyncio.sleep(interval)
            hb = gateway_pb2.Heartbeat(active_run_ids=self.dispatcher.active_run_ids())
            await self._write(gateway_pb2.PluginMessage(heartbeat=hb))

    async def _write_frame(self, results: list[RunResult]) -> None:
        if len(results) == 1:
            message = gateway_pb2.PluginMessage(result=_result_message(results[0]))
        else:
            message = gateway_pb2.PluginMessage(results=gateway_pb2.ResultBatch(results=[_result_message(r) for r in results]))
        await self._write(message)

    async def _write(self, message: gateway_pb2.PluginMessage) -> None:
        """Writes one message in order; never raises (a lost stream ends the session)."""
        if self.closed:
            return
        async with self._write_lock:
            if self.closed:
                return
            try:
                await self.call.write(message)
            except Exception:  # noqa: BLE001 - the stream is gone; run() reports the status
                pass

    async def stop(self) -> None:
        """Graceful: runs in flight fail runner.stopped (retryable), our side half-closes."""
        if self.closed:
            return
        self.dispatcher.abort_all("stopped")
        await self.outbox.idle()
        async with self._write_lock:
            try:
                await self.call.done_writing()
            except Exception:  # noqa: BLE001
                pass

    def _shut_down(self, kind: str) -> None:
        if self.closed:
            return
        self.closed = True
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        self.dispatcher.abort_all("disconnected")


class RunnerPlugin:
    """A runner plugin: ``await plugin.start()`` (the first welcome), ``await plugin.stop()``."""

    def __init__(
        self,
        *,
        url: str,
        token: str,
        author: str,
        plugin: str,
        runners: Sequence[Runner],
        version: str = "0.0.0",
        credentials: Optional[grpc.ChannelCredentials] = None,
        reconnect: Reconnect = Reconnect(),
        log: Logger = stderr_logger,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        random: Callable[[], float] = _random.random,
    ) -> None:
        if not token:
            raise ValueError("token: required (the plugin token issued by the admin API)")
        if not author or not plugin:
            raise ValueError("author, plugin: required (the identity the token was issued for)")
        if not runners:
            raise ValueError("runners: at least one runner is required")
        names = [r.name for r in runners]
        if len(set(names)) != len(names):
            raise ValueError("runners: names must be unique")
        self.url, self.token, self.author, self.plugin, self.version = url, token, author, plugin, version
        self.runners = list(runners)
        self.credentials = credentials
        self.reconnect = reconnect
        self.log = log
        self.max_batch = max_batch
        self.max_frame_bytes = max_frame_bytes
        self._random = random
        #: The last welcome, or None while not connected.
        self.welcome: Optional[Welcome] = None
        #: Connections welcomed so far.
        self.connections = 0
        self._stopping = asyncio.Event()
        self._session: Optional[_Session] = None
        self._loop_task: Optional[asyncio.Task[None]] = None
        self._first_welcome: Optional[asyncio.Future[Welcome]] = None
        self._channel: Optional[grpc.aio.Channel] = None
        self._transport: Any = None

    async def start(self) -> Welcome:
        """Connects; returns the host's first welcome; raises PluginRefusedError when refused."""
        if self._loop_task is not None:
            raise RuntimeError("already started")
        # gRPC's own reconnect backoff (up to 120 s by default) follows ours, so that an attempt
        # after a host restart is not failed fast by a channel still backing off.
        options = CHANNEL_OPTIONS + [
            ("grpc.initial_reconnect_backoff_ms", self.reconnect.initial_delay_ms),
            ("grpc.min_reconnect_backoff_ms", self.reconnect.initial_delay_ms),
            ("grpc.max_reconnect_backoff_ms", self.reconnect.max_delay_ms),
        ]
        if self.credentials is None:
            self._channel = grpc.aio.insecure_channel(self.url, options=options)
        else:
            self._channel = grpc.aio.secure_channel(self.url, self.credentials, options=options)
        self._transport = GrpcHostApiTransport(self._channel, self.token)
        self._first_welcome = asyncio.get_running_loop().create_future()
        self._loop_task = asyncio.ensure_future(self._run())

        def settle(task: "asyncio.Task[None]") -> None:
            fw = self._first_welcome
            if fw is not None and not fw.done():
                exc = None if task.cancelled() else task.exception()
                fw.set_exception(exc or RuntimeError("stopped before the host welcomed the plugin"))

        self._loop_task.add_done_callback(settle)
        return await asyncio.shield(self._first_welcome)

    async def closed(self) -> None:
        """Returns when the plugin has stopped; raises PluginRefusedError when the host refused it."""
        if self._loop_task is not None:
            await asyncio.shield(self._loop_task)

    async def stop(self, grace: float = 2.0) -> None:
        """Graceful stop: runs in flight fail with runner.stopped (retryable), the stream closes."""
        self._stopping.set()
        session = self._session
        if session is not None:
            await session.stop()
        if self._loop_task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._loop_task), grace)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001
                pass
            if not self._loop_task.done():
                self._loop_task.cancel()
        if self._channel is not None:
            await self._channel.close()

    def _on_welcome(self, welcome: Welcome) -> None:
        self.welcome = welcome
        self.connections += 1
        fw = self._first_welcome
        if fw is not None and not fw.done():
            fw.set_result(welcome)

    async def _run(self) -> None:
        assert self._channel is not None
        stub = gateway_pb2_grpc.RunnerGatewayServiceStub(self._channel)
        attempt = 0
        while not self._stopping.is_set():
            self.log("info", "connecting", {"url": self.url, "plugin": f"{self.author}/{self.plugin}"})
            self._session = _Session(self, stub)
            code, details = await self._session.run()
            self.welcome = None
            if self._stopping.is_set():
                return
            self.log("info", "stream ended", {"code": code.name, "details": details})
            if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                raise PluginRefusedError(code, details)
            if self._session.welcomed:
                attempt = 0  # that connection had worked: the backoff starts over
            delay = backoff_delay(attempt, self.reconnect, self._random) / 1000
            attempt += 1
            self.log("info", "reconnecting", {"in_ms": delay * 1000})
            try:
                await asyncio.wait_for(self._stopping.wait(), delay)
            except asyncio.TimeoutError:
                pass


def options_from_env(env: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """Plugin settings from RUNNERHOST_GRPC_URL, RUNNERHOST_PLUGIN_TOKEN, RUNNERHOST_PLUGIN_AUTHOR,
    RUNNERHOST_PLUGIN_NAME, RUNNERHOST_TLS_CA_FILE, RUNNERHOST_TLS_CERT_FILE + _KEY_FILE."""
    env = dict(os.environ) if env is None else env
    token = env.get("RUNNERHOST_PLUGIN_TOKEN")
    if not token:
        raise ValueError("RUNNERHOST_PLUGIN_TOKEN is required")
    author, plugin = env.get("RUNNERHOST_PLUGIN_AUTHOR"), env.get("RUNNERHOST_PLUGIN_NAME")
    if not author or not plugin:
        raise ValueError("RUNNERHOST_PLUGIN_AUTHOR and RUNNERHOST_PLUGIN_NAME are required")

    def read(name: str) -> Optional[bytes]:
        path = env.get(name)
        if not path:
            return None
        with open(path, "rb") as f:
            return f.read()

    ca, cert, key = read("RUNNERHOST_TLS_CA_FILE"), read("RUNNERHOST_TLS_CERT_FILE"), read("RUNNERHOST_TLS_KEY_FILE")
    if (cert is None) != (key is None):
        raise ValueError("RUNNERHOST_TLS_CERT_FILE and RUNNERHOST_TLS_KEY_FILE go together")
    credentials = grpc.ssl_channel_credentials(ca, key, cert) if (ca or cert) else None
    return {
        "url": env.get("RUNNERHOST_GRPC_URL") or "127.0.0.1:50051",
        "token": token,
        "author": author,
        "plugin": plugin,
        "credentials": credentials,
    }


async def serve(runners: Sequence[Runner], **overrides: Any) -> None:
    """Connects the runners with the settings of the environment and runs until SIGTERM/SIGINT
    (then stops gracefully) or until the host refuses the plugin: the one call a runner's main needs.
    ``asyncio.run(serve([my_runner]))``."""
    plugin = RunnerPlugin(**{**options_from_env(), **overrides, "runners": runners})
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    await plugin.start()
    closed = asyncio.ensure_future(plugin.closed())
    stop_wait = asyncio.ensure_future(stopping.wait())
    await asyncio.wait({closed, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
    stop_wait.cancel()
    await plugin.stop()
    if closed.done() and not closed.cancelled() and closed.exception():
        raise closed.exception()  # type: ignore[misc]
