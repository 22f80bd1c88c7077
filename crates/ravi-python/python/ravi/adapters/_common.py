"""What the adapters share: one code-mode tool over a sandbox and a toolbox."""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable

from .._sandbox import Approve, RunResult, Sandbox
from .._tools import normalize

#: The arguments of every adapter's tool: the script, as Ravi's own ``tool_chain`` takes it.
SCRIPT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "script": {
            "type": "string",
            "description": "The Python script. Call tools as functions with keyword "
            "arguments; print() what you need to see.",
        }
    },
    "required": ["script"],
    "additionalProperties": False,
}


class CodeMode:
    """A code-mode tool's behaviour, framework aside: the sandbox, the tools a script can
    call, the approver, the description a model reads, and what the model gets back (the
    run's ``summary``: its output, its error, one line per call)."""

    def __init__(
        self,
        tools: Iterable[Any],
        *,
        name: str = "tool_chain",
        description: str | None = None,
        approve: Approve | None = None,
        sandbox: Sandbox | None = None,
        on_result: Callable[[RunResult], None] | None = None,
        **sandbox_options: Any,
    ) -> None:
        if sandbox is not None and sandbox_options:
            raise TypeError(
                "pass either sandbox= or sandbox options ("
                + ", ".join(sorted(sandbox_options))
                + "), not both"
            )
        self.sandbox = sandbox if sandbox is not None else Sandbox(**sandbox_options)
        self.tools = normalize(tools)
        self.name = name
        self.description = description if description is not None else self.sandbox.describe(self.tools)
        self.approve = approve
        self.on_result = on_result

    @staticmethod
    def script_of(args: Any) -> str | None:
        """The script in a call's arguments (a dict or its JSON text), or None."""
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                return None
        if isinstance(args, dict) and isinstance(args.get("script"), str) and args["script"].strip():
            return args["script"]
        return None

    BAD_ARGS = "error: call this tool with a JSON object whose `script` is the Python source to run"

    def _answer(self, result: RunResult) -> str:
        if self.on_result is not None:
            self.on_result(result)
        return result.summary

    def run(self, args: Any) -> str:
        """Runs the script in ``args``; the text for the model."""
        script = self.script_of(args)
        if script is None:
            return self.BAD_ARGS
        return self._answer(
            self.sandbox.run(script, self.tools, self.approve, filename=f"<{self.name}>")
        )

    async def run_async(self, args: Any) -> str:
        """:meth:`run` on the event loop."""
        script = self.script_of(args)
        if script is None:
            return self.BAD_ARGS
        result = await self.sandbox.run_async(script, self.tools, self.approve, filename=f"<{self.name}>")
        return self._answer(result)
