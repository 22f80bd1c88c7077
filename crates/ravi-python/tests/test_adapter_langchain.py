"""ravi.adapters.langchain inside LangChain 1.x's agent, with a fake chat model."""

from __future__ import annotations

import asyncio

from conftest import need

need("langchain")

import ravi  # noqa: E402
from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tools import StructuredTool, tool as lc_tool  # noqa: E402

from ravi.adapters.langchain import code_mode_tool  # noqa: E402


class ScriptedChatModel(GenericFakeChatModel):
    """Calls ``tool_chain`` with its script, then answers with what the tool returned."""

    def bind_tools(self, tools, *, tool_choice=None, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        if isinstance(messages[-1], ToolMessage):
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=f"done: {messages[-1].content}"))])
        return super()._generate(messages, stop, run_manager, **kwargs)


def scripted(script: str) -> ScriptedChatModel:
    return ScriptedChatModel(
        messages=iter(
            [AIMessage(content="", tool_calls=[{"name": "tool_chain", "args": {"script": script}, "id": "call_1", "type": "tool_call"}])]
        )
    )


def stock(sku: str) -> int:
    """Units in stock for a SKU."""
    return {"A": 3, "B": 0}[sku]


def final(out) -> str:
    return out["messages"][-1].content


def test_the_agent_runs_the_models_script_with_the_tools():
    runs = []
    tool = code_mode_tool([stock], timeout_s=20, on_result=runs.append)
    assert isinstance(tool, StructuredTool) and "stock(" in tool.description
    agent = create_agent(scripted("print([s for s in 'AB' if stock(sku=s) == 0])"), tools=[tool])
    out = agent.invoke({"messages": [("user", "what is out of stock?")]})
    assert final(out).startswith("done: ['B']\n"), final(out)
    assert [c.tool for c in runs[0].calls] == ["stock", "stock"]


def test_langchain_tools_are_callable_from_the_script_and_ainvoke_works():
    @lc_tool
    def shipping(weight_kg: float) -> float:
        """Shipping cost for a parcel."""
        return 2.0 + weight_kg

    tool = code_mode_tool([shipping, stock])
    agent = create_agent(scripted("print(shipping(weight_kg=stock(sku='A')))"), tools=[tool])
    out = asyncio.run(agent.ainvoke({"messages": [("user", "cost?")]}))
    assert final(out).startswith("done: 5.0\n"), final(out)


def test_errors_in_the_script_are_reported_to_the_model():
    tool = code_mode_tool([stock])
    agent = create_agent(scripted("stock(sku='Z')"), tools=[tool])
    out = agent.invoke({"messages": [("user", "?")]})
    assert "KeyError" in final(out), final(out)
    assert "stock error" in final(out)


def test_risky_calls_need_the_approver():
    @ravi.tool(risk="high")
    def order(sku: str) -> str:
        """Orders more stock."""
        return f"ordered {sku}"

    denied = create_agent(scripted("print(order(sku='B'))"), tools=[code_mode_tool([order])])
    assert "ToolDenied" in final(denied.invoke({"messages": [("user", "?")]}))
    allowed = create_agent(
        scripted("print(order(sku='B'))"), tools=[code_mode_tool([order], approve=lambda r: r.tool == "order")]
    )
    assert final(allowed.invoke({"messages": [("user", "?")]})).startswith("done: ordered B")
