#!/usr/bin/env python3
"""Drive an MCP server with the official Python SDK (`mcp` 2.x) and print one JSON report.

    mcp_sdk_client.py PLAN_JSON URL
    mcp_sdk_client.py PLAN_JSON -- CMD ARGS...

PLAN_JSON: {"calls": [{"name": "...", "arguments": {...}, "progress": true}], "mode": "auto",
  In arguments, {"$prev": [I, "/json/pointer"]} is replaced by the value at that pointer in the
  result of call I (e.g. the artifact ref an earlier call handed out in `_meta`).
           "elicit": {...},   (elicit: accept every elicitation with this content)
           "manual_rounds": [{"name": "...", "arguments": {...}, "request_state": "...",
                              "retry_as": "...", "retry_arguments": {...}}]}
  manual_rounds drive 2026-07-28 input rounds by hand: the first call (with request_state if
  given, and "input_responses": {KEY: {"action": ..., "content": ...}} if given) may return
  InputRequiredResult; with retry_as, the retry names that tool, answering every input request
  with accept + elicit.
  "bearer": "TOKEN" sends `Authorization: Bearer TOKEN` on every HTTP request.
Report (stdout, last line): {"protocol": ..., "server": ..., "tools": [...], "calls": [{"result"|"error", "progress"}]}
  A client that cannot connect at all (a refused token) reports {"error": "..."} instead, with
  the messages of every exception the SDK raised.
Used by Ravi's scenario tests so that a third-party client, not Ravi's own, checks Ravi's server.
"""
import json
import os
import sys

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def pointer(doc, path):
    for part in path.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def substitute(value, calls):
    """Replaces {"$prev": [i, pointer]} by the value at `pointer` in call i's result."""
    if isinstance(value, dict):
        if set(value) == {"$prev"}:
            index, path = value["$prev"]
            return pointer(calls[index].get("result", {}), path)
        return {k: substitute(v, calls) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, calls) for v in value]
    return value


def describe(e):
    """The messages of `e`, and of every exception inside it when it is a group."""
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(describe(x) for x in e.exceptions)
    return f"{type(e).__name__}: {e}"


async def main(plan, target):
    try:
        await run(plan, target)
    except Exception as e:  # the client could not even start (e.g. HTTP 401 on initialize)
        print(json.dumps({"error": describe(e)}))


async def run(plan, target):
    report = {"calls": [], "elicitations": []}
    extra = {}
    if "elicit" in plan:  # answer every elicitation with accept + this content
        import mcp_types as types

        async def on_elicit(context, params):
            report["elicitations"].append(getattr(params, "message", ""))
            return types.ElicitResult(action="accept", content=plan["elicit"])

        extra["elicitation_callback"] = on_elicit
    if "bearer" in plan and isinstance(target, str):
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        http = create_mcp_http_client(headers={"Authorization": f"Bearer {plan['bearer']}"})
        target = streamable_http_client(target, http_client=http)
    async with Client(target, mode=plan.get("mode", "auto"), read_timeout_seconds=30, **extra) as client:
        report["protocol"] = str(client.protocol_version)
        report["server"] = client.server_info.name if client.server_info else None
        listed = await client.list_tools()
        report["tools"] = [dump(t) for t in listed.tools]
        for call in plan.get("calls", []):
            progress = []

            async def on_progress(p, total, message, _acc=progress):
                _acc.append({"progress": p, "total": total, "message": message})

            rec = {"name": call["name"], "progress": progress}
            try:
                result = await client.call_tool(
                    call["name"], substitute(call.get("arguments", {}), report["calls"]),
                    progress_callback=on_progress if call.get("progress") else None)
                rec["result"] = dump(result)
            except Exception as e:  # JSON-RPC error or transport failure
                rec["error"] = f"{type(e).__name__}: {e}"
            report["calls"].append(rec)
        report["manual_rounds"] = [await manual_round(client, plan, r) for r in plan.get("manual_rounds", [])]
    print(json.dumps(report))


async def manual_round(client, plan, spec):
    import mcp_types as types

    rec = {}
    given = {k: types.ElicitResult(**v) for k, v in spec.get("input_responses", {}).items()} or None
    try:
        first = await client.session.call_tool(
            spec["name"], spec.get("arguments", {}), request_state=spec.get("request_state"),
            input_responses=given, allow_input_required=True)
        rec["first"] = dump(first)
    except Exception as e:
        rec["first"] = {"error": f"{type(e).__name__}: {e}"}
        return rec
    if "retry_as" in spec and isinstance(first, types.InputRequiredResult):
        answers = {k: types.ElicitResult(action="accept", content=plan.get("elicit", {}))
                   for k in (first.input_requests or {})}
        try:
            retry = await client.session.call_tool(
                spec["retry_as"], spec.get("retry_arguments", {}), input_responses=answers,
                request_state=first.request_state, allow_input_required=True)
            rec["retry"] = dump(retry)
        except Exception as e:
            rec["retry"] = {"error": f"{type(e).__name__}: {e}"}
    return rec


if __name__ == "__main__":
    args = sys.argv[1:]
    plan = json.loads(args[0])
    if len(args) >= 3 and args[1] == "--":
        # The SDK passes a server only a few of its variables; the test's own state directory
        # is passed on so that a `ravi` started here never opens the user's store.
        state = {k: os.environ[k] for k in ("XDG_STATE_HOME",) if k in os.environ}
        target = StdioServerParameters(command=args[2], args=args[3:], env=state or None)
    else:
        target = args[1]
    anyio.run(main, plan, target)
