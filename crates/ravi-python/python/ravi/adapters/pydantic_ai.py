"""Code mode for PydanticAI: a toolset with one tool that runs the model's script.

    from pydantic_ai import Agent
    from ravi.adapters.pydantic_ai import CodeModeToolset

    agent = Agent("openai:gpt-5", toolsets=[CodeModeToolset([search, fetch])])
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from .._sandbox import Approve, RunResult, Sandbox
from ._common import SCRIPT_SCHEMA, CodeMode


class CodeModeToolset(AbstractToolset[Any]):
    """A PydanticAI toolset offering one tool (``tool_chain`` by default) that runs the
    model's script in Ravi's sandbox with ``tools``, each call through Ravi's invoker.

    ``sandbox_options`` are :class:`ravi.Sandbox`'s, or pass a ``sandbox``; ``approve``
    decides each risky call a script makes; ``on_result`` sees every run. Wrap it in the
    framework's own toolsets (``WrapperToolset``, ``.prefixed()``, ``.approval_required()``)
    like any other.
    """

    def __init__(
        self,
        tools: Iterable[Any],
        *,
        name: str = "tool_chain",
        description: str | None = None,
        approve: Approve | None = None,
        sandbox: Sandbox | None = None,
        on_result: Callable[[RunResult], None] | None = None,
        id: str | None = None,
        max_retries: int = 1,
        **sandbox_options: Any,
    ) -> None:
        self.mode = CodeMode(
            tools,
            name=name,
            description=description,
            approve=approve,
            sandbox=sandbox,
            on_result=on_result,
            **sandbox_options,
        )
        self._id = id
        self._max_retries = max_retries

    @property
    def id(self) -> str | None:
        return self._id

    @property
    def label(self) -> str:
        return f"ravi code mode ({self.mode.name})"

    async def get_tools(self, ctx: Any) -> dict[str, ToolsetTool[Any]]:
        definition = ToolDefinition(
            name=self.mode.name,
            description=self.mode.description,
            parameters_json_schema=dict(SCRIPT_SCHEMA),
        )
        return {
            self.mode.name: ToolsetTool(
                toolset=self,
                tool_def=definition,
                max_retries=self._max_retries,
                args_validator=SchemaValidator(core_schema.any_schema()),
            )
        }

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: Any, tool: ToolsetTool[Any]) -> Any:
        return await self.mode.run_async(tool_args)
