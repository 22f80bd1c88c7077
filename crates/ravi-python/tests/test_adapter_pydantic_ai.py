"""ravi.adapters.pydantic_ai inside a real PydanticAI agent, with FunctionModel."""

from __future__ import annotations

from conftest import need

need("pydantic_ai")

import ravi  # noqa: E402
from pydantic import BaseModel  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.toolsets import WrapperToolset  # noqa: E402

from ravi.adapters.pydantic_ai import CodeModeToolset  # noqa: E402


class Order(BaseModel):
    id: int
    total: float


def orders(customer: str) -> list[Order]:
    """A customer's orders."""
    return [Order(id=1, total=10.5), Order(id=2, total=4.5)] if customer == "ana" else []


def scripted(script: str, seen: list):
    def fn(messages, info: AgentInfo) -> ModelResponse:
        seen.append(info)
        last = messages[-1]
        returns = [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
        if not returns:
            return ModelResponse(parts=[ToolCallPart("tool_chain", {"script": script}, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart(f"done: {returns[-1].model_response_str()}")])

    return FunctionModel(fn)


def test_the_agent_runs_the_models_script_with_the_toolset():
    runs = []
    seen: list = []
    toolset = CodeModeToolset([orders], timeout_s=20, on_result=runs.append)
    agent = Agent(scripted("print(sum(o['total'] for o in orders(customer='ana')))", seen), toolsets=[toolset])
    result = agent.run_sync("How much did ana spend?")
    assert result.output.startswith("done: 15.0\n"), result.output
    [offered] = seen[0].function_tools
    assert offered.name == "tool_chain" and "orders(" in offered.description
    assert runs[0].calls[0].tool == "orders"


async def test_the_toolset_works_async_and_inside_a_wrapper():
    calls = []

    class Logged(WrapperToolset):
        async def call_tool(self, name, tool_args, ctx, tool):
            calls.append(name)
            return await super().call_tool(name, tool_args, ctx, tool)

    async def fetch_rate(currency: str) -> float:
        """Exchange rate to EUR."""
        return {"USD": 0.5}[currency]

    seen: list = []
    agent = Agent(
        scripted("print(fetch_rate(currency='USD') * 8)", seen),
        toolsets=[Logged(CodeModeToolset([fetch_rate]))],
    )
    result = await agent.run("convert")
    assert result.output.startswith("done: 4.0\n"), result.output
    assert calls == ["tool_chain"]


def test_risky_calls_follow_the_approver():
    @ravi.tool(risk="high")
    def refund(order_id: int) -> str:
        """Refunds an order."""
        return f"refunded {order_id}"

    seen: list = []
    denied = Agent(scripted("print(refund(order_id=7))", seen), toolsets=[CodeModeToolset([refund])])
    assert "ToolDenied" in denied.run_sync("refund").output
    allowed = Agent(
        scripted("print(refund(order_id=7))", seen),
        toolsets=[CodeModeToolset([refund], approve=lambda req: True)],
    )
    assert allowed.run_sync("refund").output.startswith("done: refunded 7")
