"""Code mode for the OpenAI Agents SDK (``openai-agents``).

    from agents import Agent
    from ravi.adapters.openai_agents import code_mode_tool

    agent = Agent(name="analyst", tools=[code_mode_tool([search, fetch], timeout_s=20)])

The model gets one tool, ``tool_chain``, that runs its script in Ravi's sandbox; the script
calls ``search`` and ``fetch`` as functions, each call through Ravi's invoker, and the model
reads only what the script printed and one line per call.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from .._sandbox import Approve, RunResult, Sandbox
from ._common import SCRIPT_SCHEMA, CodeMode


def code_mode_tool(
    tools: Iterable[Any],
    *,
    name: str = "tool_chain",
    description: str | None = None,
    approve: Approve | None = None,
    sandbox: Sandbox | None = None,
    on_result: Callable[[RunResult], None] | None = None,
    needs_approval: Any = False,
    **sandbox_options: Any,
) -> Any:
    """An ``agents.FunctionTool`` running the model's script with ``tools``.

    ``sandbox_options`` are :class:`ravi.Sandbox`'s (``timeout_s``, ``max_tool_calls``,
    ``memory_mb``, ``engine``, …), or pass a ``sandbox``. ``approve`` decides each risky call
    the script makes; ``needs_approval`` is the SDK's own, for the whole script.
    ``on_result`` sees every :class:`ravi.RunResult`.
    """
    from agents import FunctionTool

    mode = CodeMode(
        tools,
        name=name,
        description=description,
        approve=approve,
        sandbox=sandbox,
        on_result=on_result,
        **sandbox_options,
    )

    async def on_invoke_tool(ctx: Any, args_json: str) -> str:
        return await mode.run_async(args_json)

    tool = FunctionTool(
        name=mode.name,
        description=mode.description,
        params_json_schema=dict(SCRIPT_SCHEMA),
        on_invoke_tool=on_invoke_tool,
        strict_json_schema=True,
        needs_approval=needs_approval,
    )
    return tool
