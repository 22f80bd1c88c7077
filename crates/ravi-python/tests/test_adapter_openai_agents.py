"""ravi.adapters.openai_agents inside a real openai-agents run, with a scripted Model."""

from __future__ import annotations

import json
import os

import pytest

from conftest import need

need("agents")

import ravi  # noqa: E402
from agents import Agent, FunctionTool, Runner, set_tracing_disabled  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from ravi.adapters.openai_agents import code_mode_tool  # noqa: E402

os.environ.pop("OPENAI_API_KEY", None)
set_tracing_disabled(True)


class ScriptedModel(Model):
    """Asks for ``tool_chain`` with a script, then answers with what the tool returned."""

    def __init__(self, script: str) -> None:
        self.script = script
        self.inputs: list = []
        self.tools_seen: list = []

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs, tracing, **kw):
        self.inputs.append(input)
        self.tools_seen.append(tools)
        outs = [i for i in input if isinstance(i, dict) and i.get("type") == "function_call_output"]
        if not outs:
            item = ResponseFunctionToolCall(
                type="function_call",
                id="fc_1",
                call_id="call_1",
                name="tool_chain",
                arguments=json.dumps({"script": self.script}),
                status="completed",
            )
        else:
            item = ResponseOutputMessage(
                type="message",
                id="msg_1",
                role="assistant",
                status="completed",
                content=[ResponseOutputText(type="output_text", annotations=[], text=f"done: {outs[-1]['output']}")],
            )
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    async def stream_response(self, *a, **kw):
        raise NotImplementedError
        yield


def weather(city: str) -> dict:
    """Today's weather in a city."""
    return {"city": city, "temp_c": {"Paris": 18, "Oslo": 4}.get(city, 10)}


async def test_the_agent_runs_the_models_script_with_the_tools():
    runs: list[ravi.RunResult] = []
    tool = code_mode_tool([weather], timeout_s=20, on_result=runs.append)
    assert isinstance(tool, FunctionTool)
    assert "weather(" in tool.description and tool.params_json_schema["required"] == ["script"]
    model = ScriptedModel(
        "temps = {c: weather(city=c)['temp_c'] for c in ['Paris', 'Oslo']}\n"
        "print(max(temps, key=temps.get))\n"
    )
    result = await Runner.run(Agent(name="a", model=model, tools=[tool]), "Which is warmer?")
    assert result.final_output.startswith("done: Paris\n"), result.final_output
    # The model saw only what the script printed and the call lines, not the data.
    assert "temp_c" not in result.final_output
    assert [c.tool for c in runs[0].calls] == ["weather", "weather"]
    assert model.tools_seen[0][0].name == "tool_chain"


def test_run_sync_works_and_denied_calls_are_reported_to_the_model():
    @ravi.tool(risk="critical")
    def wipe(target: str) -> str:
        """Wipes a target."""
        raise AssertionError("must not run")

    tool = code_mode_tool([wipe])
    model = ScriptedModel("wipe(target='db')")
    result = Runner.run_sync(Agent(name="a", model=model, tools=[tool]), "wipe it")
    assert "ToolDenied" in result.final_output, result.final_output
    assert "wipe denied" in result.final_output


def test_an_approver_lets_the_script_through():
    done = []

    @ravi.tool(risk="high")
    def deploy(env: str) -> str:
        """Deploys."""
        done.append(env)
        return f"deployed to {env}"

    tool = code_mode_tool([deploy], approve=lambda req: req.arguments["env"] == "staging")
    model = ScriptedModel("print(deploy(env='staging'))")
    result = Runner.run_sync(Agent(name="a", model=model, tools=[tool]), "deploy")
    assert result.final_output.startswith("done: deployed to staging"), result.final_output
    assert done == ["staging"]


def test_bad_arguments_from_the_model_are_an_answer_not_a_crash():
    tool = code_mode_tool([weather])

    class Bad(ScriptedModel):
        async def get_response(self, system_instructions, input, *a, **kw):
            outs = [i for i in input if isinstance(i, dict) and i.get("type") == "function_call_output"]
            if outs:
                return await super().get_response(system_instructions, input, *a, **kw)
            item = ResponseFunctionToolCall(
                type="function_call", id="fc", call_id="c", name="tool_chain", arguments="{}", status="completed"
            )
            return ModelResponse(output=[item], usage=Usage(), response_id=None)

    result = Runner.run_sync(Agent(name="a", model=Bad(""), tools=[tool]), "x")
    assert "script" in result.final_output


def test_sandbox_and_sandbox_options_are_exclusive():
    with pytest.raises(TypeError, match="timeout_s"):
        code_mode_tool([weather], sandbox=ravi.Sandbox(), timeout_s=3)
