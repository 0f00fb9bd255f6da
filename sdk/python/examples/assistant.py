"""Streams a model's answer through the host after asking the host's `current_time` tool;
answers follow-ups steered into the run; on cancel the SDK cancels the handler and reports it."""

import asyncio
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # the SDK of this repository

from runner_host_sdk import message_text, runner, serve  # noqa: E402


@runner(
    "default",
    label={"en_US": "Assistant (Python SDK example)"},
    capabilities={"streaming": True, "tool_calling": True, "steering": True, "interrupt": True},
    permissions={"models": ["invoke", "stream"], "tools": ["detail", "call"]},
    config_schema=[{"type": "integer", "name": "steer_wait_ms", "default": 1000}],
)
async def assistant(ctx, io):
    models = (ctx.get("resources") or {}).get("models") or []
    if not models:
        return io.failed("no model granted to this agent", code="runner.no_model")
    time = await io.tool_call("current_time")  # a host tool, reported as tool.call.*
    async for turn in io.turns(wait_ms=int((ctx.get("config") or {}).get("steer_wait_ms", 1000))):
        answer = io.host.models.stream(models[0]["model_id"], [
            {"role": "system", "content": f"Current time: {json.dumps(time)}"},
            {"role": "user", "content": turn.text},
        ])
        async for chunk in answer:
            await io.delta(message_text(chunk))
        await io.message(answer.text)


if __name__ == "__main__":
    asyncio.run(serve([assistant]))  # RUNNERHOST_GRPC_URL, _PLUGIN_TOKEN, _PLUGIN_AUTHOR, _PLUGIN_NAME
