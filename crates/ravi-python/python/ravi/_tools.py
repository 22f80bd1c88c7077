"""Tools: plain Python callables, ``@ravi.tool``, and Ravi's own tool sets."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime
import enum
import functools
import inspect
import json
import pathlib
import uuid
from typing import Any, Callable, Iterable, Sequence

from . import _native
from ._schema import parse_docstring, signature_schema

RISKS = ("safe", "sensitive", "high", "critical")


class Tool:
    """A Python callable described as a tool: its name, description, JSON Schema and risk.

    Made by :func:`tool` (or implicitly for a plain function given to ``Sandbox.run``).
    Calling it calls the function, so a decorated function still works as Python.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        risk: str = "safe",
        parameters: dict[str, Any] | None = None,
        timeout_s: float | None = None,
        idempotent: bool = False,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"ravi.tool: expected a function, got {type(fn).__name__}")
        tool_name = name or getattr(fn, "__name__", None)
        if not tool_name or tool_name == "<lambda>":
            raise ValueError("ravi.tool: a lambda or callable object needs name=...")
        if risk not in RISKS:
            raise ValueError(
                f"ravi.tool: risk={risk!r} is not valid: expected one of {', '.join(map(repr, RISKS))}"
            )
        if parameters is not None:
            if not isinstance(parameters, dict) or parameters.get("type") != "object":
                raise ValueError(
                    f"ravi.tool: parameters of {tool_name!r} must be a JSON Schema dict whose "
                    '"type" is "object"'
                )
            doc, _ = parse_docstring(inspect.getdoc(fn))
            schema, converters = parameters, {}
        else:
            doc, schema, converters = signature_schema(fn, tool_name)
        self.fn = fn
        self.name = tool_name
        self.description = description if description is not None else (doc or tool_name)
        self.parameters = schema
        self.risk = risk
        self.timeout_s = timeout_s
        self.idempotent = idempotent
        self._converters = converters
        self.__wrapped__ = fn
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<ravi.Tool {self.name} risk={self.risk}>"

    def _spec(self, loop: asyncio.AbstractEventLoop | None) -> Any:
        """The native spec for one run; async results are awaited on ``loop`` when the run
        was started from it (``run_async``), otherwise on a loop of their own."""
        fn = self.fn
        converters = self._converters

        def invoke(args_json: str) -> str:
            try:
                args = json.loads(args_json)
                for key, conv in converters.items():
                    if key in args:
                        args[key] = conv(args[key])
                value = fn(**args)
                if inspect.isawaitable(value):
                    value = _await(value, loop)
                return json.dumps({"ok": value}, default=_to_json)
            except BaseException as e:  # noqa: BLE001 - every failure is the script's ToolError
                if isinstance(e, (KeyboardInterrupt, SystemExit)):
                    raise
                return json.dumps({"error": _describe(e)})

        return _native.ToolSpec(
            self.name,
            self.description,
            json.dumps(self.parameters),
            self.risk,
            invoke,
            self.timeout_s,
            self.idempotent,
        )


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    risk: str = "safe",
    description: str | None = None,
    parameters: dict[str, Any] | None = None,
    timeout_s: float | None = None,
    idempotent: bool = False,
) -> Any:
    """Marks a function as a tool, with its risk and, optionally, another name.

    ``risk`` is ``"safe"`` (runs without asking), ``"sensitive"``, ``"high"`` or
    ``"critical"`` (each call is put to the run's ``approve`` callable, and denied without
    one). The schema comes from the annotations and the description from the docstring
    unless ``parameters`` or ``description`` are given. Usable bare (``@ravi.tool``) or with
    arguments (``@ravi.tool(risk="high")``).
    """

    def wrap(f: Callable[..., Any]) -> Tool:
        made = Tool(
            f,
            name=name,
            description=description,
            risk=risk,
            parameters=parameters,
            timeout_s=timeout_s,
            idempotent=idempotent,
        )
        functools.update_wrapper(made, f, assigned=("__module__", "__qualname__"), updated=())
        return made

    if fn is not None:
        return wrap(fn)
    return wrap


def _describe(e: BaseException) -> str:
    message = str(e)
    return f"{type(e).__name__}: {message}" if message else type(e).__name__


def _await(awaitable: Any, loop: asyncio.AbstractEventLoop | None) -> Any:
    if loop is not None and loop.is_running():
        return asyncio.run_coroutine_threadsafe(_as_coroutine(awaitable), loop).result()
    return asyncio.run(_as_coroutine(awaitable))


async def _as_coroutine(awaitable: Any) -> Any:
    return await awaitable


def _to_json(value: Any) -> Any:
    """What ``json.dumps`` cannot write itself: models, dataclasses, enums, dates, paths, bytes."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (pathlib.PurePath, uuid.UUID)):
        return str(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(raw).decode("ascii")
    raise TypeError(f"a {type(value).__name__} cannot be returned to a script (not JSON)")


def as_tool(item: Any, index: int) -> Any:
    """``item`` as something a run takes: a :class:`Tool`, or a native tool set."""
    if isinstance(item, (Tool, _native.ToolSet)):
        return item
    if callable(item):
        return Tool(item)
    raise TypeError(
        f"tools[{index}] is a {type(item).__name__}: expected a function, a @ravi.tool, "
        "ravi.builtins(...) or ravi.mcp_tools(...)"
    )


def normalize(tools: Iterable[Any] | None) -> list[Any]:
    """The run's tools, each a :class:`Tool` or a native tool set."""
    if tools is None:
        return []
    if isinstance(tools, (Tool, _native.ToolSet)) or (callable(tools) and not isinstance(tools, type)):
        tools = [tools]
    return [as_tool(t, i) for i, t in enumerate(tools)]


def native_tools(tools: Sequence[Any], loop: asyncio.AbstractEventLoop | None) -> list[Any]:
    return [t._spec(loop) if isinstance(t, Tool) else t for t in tools]


def builtins(
    workspace: str | pathlib.Path = ".",
    *,
    allow_hosts: Sequence[str] | None = None,
    allow_private: bool = False,
    names: Sequence[str] | None = None,
) -> Any:
    """Ravi's built-in tools, for ``Sandbox.run``: ``read_file``, ``write_file``,
    ``list_files``, ``file_exists``, ``delete_file`` and ``shell`` confined to ``workspace``;
    ``calculator``; ``http_get`` (only ``allow_hosts`` when given); ``read_result``. ``names``
    keeps only those. Their risks are Ravi's (``write_file`` high, ``delete_file`` and
    ``shell`` critical), so those calls need ``approve``."""
    return _native.ToolSet.builtins(
        str(pathlib.Path(workspace)),
        list(allow_hosts) if allow_hosts is not None else None,
        allow_private,
        list(names) if names is not None else None,
    )


def mcp_tools(spec: str, *, timeout_s: float = 30.0) -> Any:
    """Attaches an MCP server and returns its tools (named ``NAME__tool``), for
    ``Sandbox.run``: ``"NAME=COMMAND ARGS..."`` starts a stdio server (stopped by
    ``.close()`` or when the set is dropped), ``"NAME=http://..."`` connects to a streamable
    HTTP one. Their risk comes from the server's annotations (read-only tools are safe)."""
    if not isinstance(spec, str):
        raise TypeError(f"ravi.mcp_tools: spec must be a str like 'fs=npx server', got {type(spec).__name__}")
    return _native.ToolSet.mcp(spec, timeout_s)


def tool_schemas(tools: Iterable[Any], provider: str = "openai", *, strict: bool = False) -> list[dict[str, Any]]:
    """The tool declarations Ravi would send ``provider`` (``"openai"``,
    ``"openai-responses"``, ``"anthropic"``, ``"gemini"`` or ``"mcp"``) for ``tools``."""
    declared, _findings = _native.tool_schemas(native_tools(normalize(tools), None), provider, strict)
    return json.loads(declared)
