"""Unit tests of the dispatcher, emitters, steering and host API through the fake host."""

import asyncio
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

from assistant import assistant  # noqa: E402
from echo import echo  # noqa: E402

from runner_host_sdk import (  # noqa: E402
    HostApiError,
    NotFoundError,
    RateLimitedError,
    RunAbortedError,
    Runner,
    UnauthorizedError,
    host_api_error,
    manifest_of,
    message_text,
    runner,
)
from runner_host_sdk.testing import FakeHost, FakeRun  # noqa: E402


def echo_model(messages):
    return f"echo: {message_text(messages[-1])}"


class ExamplesTest(unittest.IsolatedAsyncioTestCase):
    async def test_assistant_answers_and_follows_up(self):
        host = FakeHost(
            runners=[assistant],
            models={"m1": echo_model},
            tools={"current_time": lambda params: {"iso": "2026-01-01T00:00:00Z"}},
        )
        run = host.start("hi", config={"steer_wait_ms": 0})
        host.steer(run.run_id, "and then?")
        outcome = await run.done
        self.assertEqual(outcome.status, "completed")
        self.assertEqual(outcome.messages, ["echo: hi", "echo: and then?"])
        self.assertEqual(outcome.streamed, "echo: hiecho: and then?")
        types = [r["type"] for r in outcome.results]
        self.assertEqual(types[:2], ["tool.call.started", "tool.call.completed"])
        self.assertEqual(outcome.results[1]["data"]["result"], {"iso": "2026-01-01T00:00:00Z"})
        self.assertEqual(types[-1], "run.completed")
        self.assertEqual([r["sequence"] for r in outcome.results], list(range(1, len(types) + 1)))
        # The model saw the tool's answer in its system message.
        asked = [req for method, req in host.calls if method == "StreamModel"]
        self.assertIn("2026-01-01T00:00:00Z", asked[0]["messages"][0]["content"])

    async def test_assistant_without_a_model_fails_with_its_code(self):
        outcome = await FakeHost(runners=[assistant], tools={"current_time": lambda p: {}}).run("hi")
        self.assertEqual((outcome.status, outcome.code), ("failed", "runner.no_model"))

    async def test_assistant_without_the_tool_grant_fails_typed(self):
        outcome = await FakeHost(runners=[assistant], models={"m1": echo_model}).run("hi")
        self.assertEqual((outcome.status, outcome.code), ("failed", "runner.exception"))
        self.assertIn("unauthorized", outcome.error)
        completed = [r for r in outcome.results if r["type"] == "tool.call.completed"]
        self.assertIn("not authorized", completed[0]["data"]["error"])

    async def test_echo_streams_word_by_word(self):
        outcome = await FakeHost(runners=[echo]).run("one two three")
        self.assertEqual(outcome.messages, ["one two three"])
        deltas = [r["data"]["chunk"] for r in outcome.results if r["type"] == "message.delta"]
        self.assertEqual([d["content"] for d in deltas], ["one", " two", " three"])
        self.assertEqual([d["msg_sequence"] for d in deltas], [1, 2, 3])


class DispatcherTest(unittest.IsolatedAsyncioTestCase):
    async def test_cancel_reaches_the_handler_and_fails_the_run_at_once(self):
        seen = {}
        entered = asyncio.Event()

        @runner("slow")
        async def slow(ctx, io):
            entered.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                seen["aborted"] = io.aborted.is_set()
                seen["kind"] = io.abort_reason.kind
                io.message("too late")  # dropped: the run has ended
                raise

        host = FakeHost(runners=[slow])
        run = host.start("x")
        await entered.wait()
        host.cancel(run.run_id, "user left")
        outcome = await run.done
        self.assertEqual((outcome.status, outcome.code), ("failed", "cancelled"))
        self.assertEqual(outcome.error, "cancelled: user left")
        await asyncio.sleep(0.01)
        self.assertEqual(seen, {"aborted": True, "kind": "cancelled"})
        self.assertEqual([r["type"] for r in run.results], ["run.failed"])

    async def test_large_results_of_one_iteration_leave_in_bounded_frames_one_too_large_fails_its_run(self):
        max_frame_bytes = 64 * 1024

        @runner("chunks")
        async def chunks(ctx, io):
            size = int(ctx["config"]["size"])
            # 40 results of `size` bytes in one iteration: far more than one frame holds.
            await asyncio.gather(*(io.emit("demo.chunk", {"i": i, "blob": "z" * size}) for i in range(40)))
            await io.completed()

        host = FakeHost(runners=[chunks], max_frame_bytes=max_frame_bytes)
        big = host.start("x", config={"size": 10_000})
        huge = host.start("x", config={"size": max_frame_bytes})
        ok, failed = await asyncio.gather(big.done, huge.done)
        self.assertEqual(ok.status, "completed")
        self.assertEqual([r["sequence"] for r in ok.results], list(range(1, len(ok.results) + 1)))
        self.assertEqual([r["data"]["i"] for r in ok.results[:40]], list(range(40)))
        self.assertEqual((failed.status, failed.code), ("failed", "runner.result_too_large"))
        self.assertRegex(failed.error, r"^a demo\.chunk result of \d+ bytes does not fit one gRPC frame \(max_frame_bytes 65536\)")
        self.assertEqual([(r["type"], r["sequence"]) for r in failed.results], [("run.failed", 1)])
        self.assertGreater(len(host.frames), 5)
        for frame in host.frames:  # results.py's tests check the encoded bytes; the JSON is a floor here
            self.assertLessEqual(sum(len(json.dumps(r["data"])) for r in frame), max_frame_bytes)

    async def test_deadline_aborts_with_runner_timeout_and_host_calls_raise(self):
        errors = []

        @runner("waits", capabilities={"steering": True})
        async def waits(ctx, io):
            try:
                await io.host.steering.pull(wait_ms=30_000)
            except BaseException as e:  # the call is abandoned when the run is aborted
                errors.append(type(e).__name__)
                raise

        host = FakeHost(runners=[waits])
        outcome = await host.run("x", deadline_ms=50)
        self.assertEqual((outcome.status, outcome.code), ("failed", "runner.timeout"))
        await asyncio.sleep(0.01)
        self.assertEqual(len(errors), 1)
        self.assertIn(errors[0], ("CancelledError", "RunAbortedError"))

    async def test_a_raising_handler_fails_only_its_run(self):
        @runner("bad")
        async def bad(ctx, io):
            io.delta("partial")
            raise RuntimeError("boom")

        @runner("good")
        async def good(ctx, io):
            await asyncio.sleep(0.01)
            io.message("fine")

        host = FakeHost(runners=[bad, good])
        r1, r2 = host.start("a", runner="bad"), host.start("b", runner="good")
        o1, o2 = await r1.done, await r2.done
        self.assertEqual((o1.status, o1.code, o1.error), ("failed", "runner.exception", "boom"))
        self.assertEqual((o2.status, o2.messages), ("completed", ["fine"]))

    async def test_retryable_host_errors_make_a_retryable_failure(self):
        @runner("r")
        async def r(ctx, io):
            await io.host.models.invoke("m", "hi")

        host = FakeHost(
            runners=[r],
            handlers={"InvokeModel": lambda req: (_ for _ in ()).throw(host_api_error("rate_limited", "slow down"))},
        )
        outcome = await host.run("x")
        self.assertEqual(outcome.code, "runner.exception")
        self.assertTrue(outcome.results[-1]["data"]["retryable"])

    async def test_returning_closes_a_streamed_message_and_completes(self):
        @runner("s")
        async def s(ctx, io):
            io.delta("a")
            io.delta("b")

        outcome = await FakeHost(runners=[s]).run("x")
        self.assertEqual([r["type"] for r in outcome.results], ["message.delta", "message.delta", "message.completed", "run.completed"])
        self.assertEqual(outcome.messages, ["ab"])

    async def test_explicit_failed_wins_and_later_emits_are_dropped(self):
        @runner("f")
        async def f(ctx, io):
            io.failed("nope", code="runner.custom")
            io.message("ignored")

        outcome = await FakeHost(runners=[f]).run("x")
        self.assertEqual([r["type"] for r in outcome.results], ["run.failed"])
        self.assertEqual(outcome.code, "runner.custom")

    async def test_steering_falls_back_to_one_turn_without_the_grant(self):
        turns = []

        @runner("no_steer")  # no capabilities.steering: no steering_pull grant
        async def no_steer(ctx, io):
            async for turn in io.turns(wait_ms=1000):
                turns.append(turn.text)
            self.assertEqual(await io.drain_steering(), [])

        host = FakeHost(runners=[no_steer])
        run = host.start("first")
        host.steer(run.run_id, "never pulled")
        await run.done
        self.assertEqual(turns, ["first"])
        self.assertNotIn("SteeringPull", [m for m, _ in host.calls])

    async def test_unknown_runner_fails_not_found(self):
        host = FakeHost(runners=[echo])
        first = host.start("x")
        await first.done
        ctx = dict(first.ctx, run_id="r-missing")
        run = host.runs["r-missing"] = FakeRun(ctx)
        host.dispatcher.start("missing", ctx)
        outcome = await run.done
        self.assertEqual((outcome.status, outcome.code), ("failed", "runner.not_found"))

    def test_runner_names_are_checked(self):
        async def h(ctx, io):
            pass

        with self.assertRaisesRegex(ValueError, "^name: "):
            Runner("bad name", h)
        m = manifest_of(Runner("ok", h, capabilities={"steering": True}), "me", "plug")
        self.assertEqual(m["id"], "plugin:me/plug/ok")
        self.assertEqual(m["protocol_version"], "1")


class HostApiTest(unittest.IsolatedAsyncioTestCase):
    async def test_host_api_surface_and_typed_errors(self):
        got = {}

        @runner("probe", permissions={"storage": ["plugin"], "history": ["page"], "events": ["get"]})
        async def probe(ctx, io):
            h = io.host
            got["invoke"] = (await h.models.invoke("m1", "hi"))["message"]["content"]
            got["tokens"] = await h.models.count_tokens("m1", "one two three")
            got["unknown_model"] = await _err(h.models.invoke("nope", "hi"))
            got["tool_refused"] = await _err(h.tools.call("http_fetch"))
            await h.state.set("conversation", "n", 41)
            got["state"] = await h.state.get("conversation", "n")
            got["state_missing"] = await h.state.get("conversation", "absent")
            await h.storage.set("plugin", "k", "stored")
            got["stored"] = await h.storage.get("plugin", "k")
            got["storage_missing"] = await h.storage.get("plugin", "absent")
            got["keys"] = (await h.storage.list("plugin"))["keys"]
            got["kb"] = await h.knowledge.retrieve("kb1", "q", top_k=1)
            got["history"] = (await h.history.page(limit=1))["items"]
            got["event"] = await _err(h.events.get("e1"))
            got["run"] = (await h.run.get())["status"]

        host = FakeHost(
            runners=[probe],
            models={"m1": lambda msgs: "ok"},
            knowledge_bases={"kb1": lambda q, k: [{"id": "d1", "content": q}]},
            history=[{"id": "t1"}, {"id": "t2"}],
        )
        outcome = await host.run("x")
        self.assertEqual(outcome.status, "completed", outcome.error)
        self.assertEqual(got["invoke"], "ok")
        self.assertGreater(got["tokens"], 0)
        self.assertEqual(got["unknown_model"], ("UnauthorizedError", "unauthorized", "InvokeModel"))
        self.assertEqual(got["tool_refused"], ("UnauthorizedError", "unauthorized", "CallTool"))
        self.assertEqual(got["event"], ("NotFoundError", "not_found", "EventGet"))
        self.assertEqual((got["state"], got["state_missing"]), (41, None))
        self.assertEqual((got["stored"], got["storage_missing"], got["keys"]), (b"stored", None, ["k"]))
        self.assertEqual(got["kb"], [{"id": "d1", "content": "q"}])
        self.assertEqual(got["history"], [{"id": "t2"}])
        self.assertEqual(got["run"], "running")

    def test_error_classes(self):
        e = host_api_error("not_found", "gone", method="EventGet")
        self.assertIsInstance(e, NotFoundError)
        self.assertIsInstance(e, HostApiError)
        self.assertFalse(e.retryable)
        self.assertTrue(host_api_error("rate_limited", "x").retryable)
        self.assertIsInstance(host_api_error("rate_limited", "x"), RateLimitedError)
        self.assertIsInstance(host_api_error("unauthorized", "x"), UnauthorizedError)
        with self.assertRaisesRegex(ValueError, "^code: "):
            host_api_error("nope", "x")
        self.assertEqual(RunAbortedError("deadline", "late").kind, "deadline")


async def _err(coro):
    try:
        await coro
    except HostApiError as e:
        return (type(e).__name__, e.code, e.method)
    return None


if __name__ == "__main__":
    unittest.main()
