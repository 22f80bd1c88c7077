"""Code mode for LangChain and LangGraph: a ``StructuredTool`` that runs the model's script.

    from langchain.agents import create_agent
    from ravi.adapters.langchain import code_mode_tool

    agent = create_agent(model, tools=[code_mode_tool([search, fetch])])

LangChain tools (``BaseTool``, ``@tool``) can be given too: a script calls them like any
other function, each call through Ravi's invoker.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from langchain_core.tools import BaseTool, StructuredTool

from .._sandbox import Approve, RunResult, Sandbox
from .._tools import Tool
from ._common import SCRIPT_SCHEMA, CodeMode


def from_langchain(tool: BaseTool, *, risk: str = "safe") -> Tool:
    """A LangChain tool as a Ravi tool: its name, description and argument schema, called
    with ``invoke`` (``ainvoke`` when the script runs from ``run_async``)."""
    schema = tool.tool_call_schema
    if isinstance(schema, dict):
        parameters = {k: v for k, v in schema.items() if k not in ("title", "description")}
    else:
        parameters = schema.model_json_schema()
        parameters.pop("title", None)
        parameters.pop("description", None)
    parameters.setdefault("type", "object")
    parameters.setdefault("properties", {})

    async def call(**kwargs: Any) -> Any:
        return await tool.ainvoke(kwargs)

    call.__name__ = tool.name
    return Tool(
        call,
        name=tool.name,
        description=tool.description or tool.name,
        parameters=parameters,
        risk=risk,
    )


def code_mode_tool(
    tools: Iterable[Any],
    *,
    name: str = "tool_chain",
    description: str | None = None,
    approve: Approve | None = None,
    sandbox: Sandbox | None = None,
    on_result: Callable[[RunResult], None] | None = None,
    **sandbox_options: Any,
) -> StructuredTool:
    """A LangChain ``StructuredTool`` running the model's script with ``tools`` (Python
    callables, ``@ravi.tool``s, Ravi tool sets, or LangChain tools).

    ``sandbox_options`` are :class:`ravi.Sandbox`'s, or pass a ``sandbox``; ``approve``
    decides each risky call a script makes; ``on_result`` sees every run.
    """
    converted = [from_langchain(t) if isinstance(t, BaseTool) else t for t in tools]
    mode = CodeMode(
        converted,
        name=name,
        description=description,
        approve=approve,
        sandbox=sandbox,
        on_result=on_result,
        **sandbox_options,
    )

    def run(**kwargs: Any) -> str:
        return mode.run(kwargs)

    async def arun(**kwargs: Any) -> str:
        return await mode.run_async(kwargs)

    return StructuredTool.from_function(
        func=run,
        coroutine=arun,
        name=mode.name,
        description=mode.description,
        args_schema=dict(SCRIPT_SCHEMA),
    )
