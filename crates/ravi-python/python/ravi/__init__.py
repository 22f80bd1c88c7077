"""Ravi for Python: run model-written scripts in Ravi's wasmtime sandbox, every tool call
going through Ravi's invoker (schema validation, budget, risk and approval, timeouts, large
results by reference, a trace), with adapters for openai-agents, PydanticAI and LangChain.

    import ravi

    def add(a: int, b: int) -> int:
        "Adds two integers."
        return a + b

    result = ravi.Sandbox().run("print(add(a=2, b=3))", tools=[add])
    print(result.output)        # 5
    print(result.calls[0].tool) # add

See docs/python.md in Ravi's repository for the whole guide.
"""

from ._native import CancelToken, RaviError, ToolSet, __version__
from ._sandbox import ApprovalRequest, Artifact, CallRecord, RunResult, Sandbox
from ._tools import Tool, builtins, mcp_tools, tool, tool_schemas

__all__ = [
    "ApprovalRequest",
    "Artifact",
    "CallRecord",
    "CancelToken",
    "RaviError",
    "RunResult",
    "Sandbox",
    "Tool",
    "ToolSet",
    "__version__",
    "builtins",
    "mcp_tools",
    "tool",
    "tool_schemas",
]
