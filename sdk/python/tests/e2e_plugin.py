"""The Python fixture plugin of test/e2e/runner-sdk-python.e2e-spec.ts: a host-API probe and a
runner that opens the run-scoped MCP bridge and prints where it is, its stdio relay entry
included (one JSON line on stdout)."""

import asyncio
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from runner_host_sdk import HostApiError, UnauthorizedError, runner, serve  # noqa: E402


def describe(e):
    if isinstance(e, HostApiError):
        return {"class": type(e).__name__, "code": e.code, "method": e.method, "unauthorized": isinstance(e, UnauthorizedError)}
    return repr(e)


async def caught(coro):
    try:
        return await coro
    except Exception as e:  # noqa: BLE001
        return e


@runner("probe", permissions={"models": ["invoke", "count_tokens"], "tools": ["call"], "storage": ["plugin"]})
async def probe(ctx, io):
    h = io.host
    refused = await caught(h.tools.call("http_fetch", {"url": "http://127.0.0.1:1/"}))
    unknown_model = await caught(h.models.invoke("nope", "hi"))
    answer = await h.models.invoke("scripted", "say ok")
    tokens = await h.models.count_tokens("scripted", "one two three")
    await h.storage.set("plugin", "k", "stored")
    await h.state.set("conversation", "n", 41)
    io.message(json.dumps({
        "refused": describe(refused),
        "unknown_model": describe(unknown_model),
        "answer": answer["message"]["content"],
        "tokens_positive": tokens > 0,
        "stored": (await h.storage.get("plugin", "k")).decode(),
        "missing": await h.storage.get("plugin", "absent"),
        "state": await h.state.get("conversation", "n"),
    }))


@runner("bridge", capabilities={"steering": True, "tool_calling": True}, permissions={"tools": ["detail", "call"]})
async def bridge(ctx, io):
    async with io.mcp_bridge() as mcp:
        print(json.dumps({"run_id": io.run_id, "url": mcp.url, "secret": mcp.secret, "stdio": mcp.stdio}), flush=True)
        async for turn in io.turns(wait_ms=20_000):  # until "done" is steered into the run
            if turn.text == "done":
                break
        io.message(f"the bridge served {mcp.calls} calls")


if __name__ == "__main__":
    asyncio.run(serve([probe, bridge]))
