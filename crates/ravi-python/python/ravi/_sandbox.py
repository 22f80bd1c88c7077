"""``ravi.Sandbox``: scripts in Ravi's wasmtime sandbox, every tool call through the invoker."""

from __future__ import annotations

import asyncio
import inspect
import json
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from . import _native
from ._tools import _await, native_tools, normalize


@dataclass(frozen=True)
class ApprovalRequest:
    """A call waiting for ``approve``: the tool, the arguments exactly as they will run, the
    tool's risk, why it is asked, where it comes from (``code_mode``) and the script line."""

    id: str
    call_id: str
    tool: str
    arguments: Any
    args_digest: str
    risk: str
    reason: str
    source: str
    line: int | None
    deadline: str

    @classmethod
    def _from_json(cls, text: str) -> "ApprovalRequest":
        d = json.loads(text)
        return cls(
            id=d.get("id", ""),
            call_id=d.get("call_id", ""),
            tool=d.get("tool", ""),
            arguments=d.get("arguments"),
            args_digest=d.get("args_digest", ""),
            risk=d.get("risk", ""),
            reason=d.get("reason", ""),
            source=d.get("source", ""),
            line=d.get("line"),
            deadline=d.get("deadline", ""),
        )


@dataclass(frozen=True)
class CallRecord:
    """One tool call a script made, as the invoker traced it."""

    seq: int
    call_id: str
    tool: str
    status: str
    duration_ms: int
    executed: bool
    summary: str
    args_digest: str
    artifact_ref: str | None

    @classmethod
    def _from_dict(cls, d: dict[str, Any]) -> "CallRecord":
        return cls(
            seq=d.get("seq", 0),
            call_id=d.get("call_id", ""),
            tool=d.get("tool", ""),
            status=d.get("status", ""),
            duration_ms=d.get("duration_ms", 0),
            executed=bool(d.get("executed", False)),
            summary=d.get("summary", ""),
            args_digest=d.get("args_digest", ""),
            artifact_ref=d.get("artifact_ref"),
        )


@dataclass(frozen=True)
class Artifact:
    """A value a run stored instead of inlining it (a large tool result), or a file the
    script left under ``/tmp`` (CPython engine). ``read()`` returns its bytes."""

    ref: str | None
    size: int | None
    media_type: str | None
    tool: str | None
    path: str | None
    _store: Any = field(repr=False, compare=False, default=None)

    def read(self) -> bytes:
        """The stored bytes."""
        if self.ref is None or self._store is None:
            raise ValueError("this artifact was not stored")
        return self._store.read(self.ref)


@dataclass(frozen=True)
class RunResult:
    """What a run did: its status (``"ok"``, ``"error"``, ``"timeout"``, ``"cancelled"``,
    ``"resource_exhausted"``), what it printed, the uncaught error, every tool call, the
    stored artifacts, and the text Ravi gives a model about it (``summary``)."""

    status: str
    output: str
    error: str | None
    error_type: str | None
    traceback: str | None
    calls: list[CallRecord]
    artifacts: list[Artifact]
    duration_ms: int
    summary: str
    raw: dict[str, Any] = field(repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """Whether the script ran to its end."""
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        """The result as Ravi's JSON (``ravi run --json`` prints the same shape)."""
        return dict(self.raw)

    @classmethod
    def _from_native(cls, text: str, store: Any) -> "RunResult":
        d = json.loads(text)
        err = d.get("error") or None
        error = None
        if err:
            message = err.get("message", "")
            error = f"{err.get('exc_type', 'Error')}: {message}" if message else err.get("exc_type")
        return cls(
            status=d.get("status", ""),
            output=d.get("output_text", ""),
            error=error,
            error_type=err.get("exc_type") if err else None,
            traceback=(err.get("traceback") or None) if err else None,
            calls=[CallRecord._from_dict(c) for c in d.get("call_trace", [])],
            artifacts=[
                Artifact(
                    ref=a.get("ref"),
                    size=a.get("size"),
                    media_type=a.get("media_type"),
                    tool=a.get("tool"),
                    path=a.get("path"),
                    _store=store,
                )
                for a in d.get("artifacts", [])
            ],
            duration_ms=d.get("duration_ms", 0),
            summary=d.get("summary", ""),
            raw=d,
        )


Approve = Callable[[ApprovalRequest], Any]


def _decider(approve: Approve | None, loop: asyncio.AbstractEventLoop | None) -> Any:
    if approve is None:
        return None
    if not callable(approve):
        raise TypeError(
            f"approve must be a callable taking a ravi.ApprovalRequest and returning True or "
            f"False, got {type(approve).__name__}"
        )

    def decide(request_json: str) -> str:
        try:
            answer = approve(ApprovalRequest._from_json(request_json))
            if inspect.isawaitable(answer):
                answer = _await(answer, loop)
            return "true" if answer is True else "false"
        except Exception as e:  # noqa: BLE001 - a failing approver denies (fails closed)
            warnings.warn(
                f"ravi: the approve callable raised {type(e).__name__}: {e}; the call is denied",
                RuntimeWarning,
                stacklevel=2,
            )
            return "false"

    return decide


class Sandbox:
    """Runs Python scripts in Ravi's sandbox (wasmtime: no files, no network, a memory cap
    and a wall clock), each tool call going through Ravi's invoker: validation against the
    tool's schema, the call budget, risk and approval, per-call timeouts, large results by
    reference, and a trace.

    ``timeout_s`` is the whole run's wall clock, tool calls included; ``max_tool_calls`` the
    calls a run may make; ``memory_mb`` the interpreter's memory; ``engine`` ``"rustpython"``
    (starts in well under a millisecond) or ``"cpython"`` (numpy and pandas; a wheel built
    with the ``cpython`` feature). A sandbox holds settings only: one can run many scripts,
    from many threads at once.
    """

    def __init__(
        self,
        timeout_s: float = 30.0,
        max_tool_calls: int = 50,
        memory_mb: int = 256,
        engine: str = "rustpython",
        *,
        call_timeout_s: float | None = None,
        output_bytes: int = 1 << 20,
        approval_timeout_s: float | None = None,
        max_inline_result_bytes: int = 4096,
    ) -> None:
        for pname, value in (
            ("timeout_s", timeout_s),
            ("call_timeout_s", call_timeout_s),
            ("approval_timeout_s", approval_timeout_s),
        ):
            if pname != "timeout_s" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{pname} must be a number of seconds, got {type(value).__name__}")
        for pname, value in (
            ("max_tool_calls", max_tool_calls),
            ("memory_mb", memory_mb),
            ("output_bytes", output_bytes),
            ("max_inline_result_bytes", max_inline_result_bytes),
        ):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{pname} must be an int, got {type(value).__name__}")
        if not isinstance(engine, str):
            raise TypeError(f"engine must be 'rustpython' or 'cpython', got {type(engine).__name__}")
        self._native = _native.Sandbox(
            float(timeout_s),
            max_tool_calls,
            memory_mb,
            engine,
            None if call_timeout_s is None else float(call_timeout_s),
            output_bytes,
            None if approval_timeout_s is None else float(approval_timeout_s),
            max_inline_result_bytes,
        )

    @property
    def engine(self) -> str:
        """``"rustpython"`` or ``"cpython"``."""
        return self._native.engine

    def warm_up(self) -> None:
        """Loads the engine now, so the first run does not wait for it (the first load on a
        machine prepares the guest: tens of seconds, once)."""
        self._native.warm_up()

    def describe(self, tools: Iterable[Any] | None = None) -> str:
        """What a model is told about running scripts with ``tools``: the functions, their
        signatures, the limits (the text the framework adapters give their tool)."""
        return self._native.describe(native_tools(normalize(tools), None))

    def run(
        self,
        code: str,
        tools: Iterable[Any] | None = None,
        approve: Approve | None = None,
        *,
        filename: str = "<script>",
        cancel: Any = None,
    ) -> RunResult:
        """Runs ``code`` with ``tools`` and returns what happened. Never raises for what
        the script does (an exception in it, a denied call, a timeout are the result's
        status); raises ``TypeError``/``ValueError`` for bad arguments and ``ravi.RaviError``
        when the sandbox cannot be loaded. The GIL is released while Ravi works."""
        return self._run(code, tools, approve, filename, cancel, None)

    async def run_async(
        self,
        code: str,
        tools: Iterable[Any] | None = None,
        approve: Approve | None = None,
        *,
        filename: str = "<script>",
    ) -> RunResult:
        """:meth:`run` without blocking the event loop: async tools and an async
        ``approve`` run on this loop. Cancelling the awaiting task stops the script (its
        calls in flight are cancelled) before the cancellation propagates."""
        loop = asyncio.get_running_loop()
        token = _native.CancelToken()
        future = loop.run_in_executor(None, self._run, code, tools, approve, filename, token, loop)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            token.cancel()
            try:
                await future
            except Exception:  # noqa: BLE001 - the run is being abandoned
                pass
            raise

    def _run(
        self,
        code: str,
        tools: Iterable[Any] | None,
        approve: Approve | None,
        filename: str,
        cancel: Any,
        loop: asyncio.AbstractEventLoop | None,
    ) -> RunResult:
        if not isinstance(code, str):
            raise TypeError(f"code must be a str of Python source, got {type(code).__name__}")
        if cancel is not None and not isinstance(cancel, _native.CancelToken):
            raise TypeError("cancel must be a ravi.CancelToken")
        specs = native_tools(normalize(tools), loop)
        text, store = self._native.run(code, specs, _decider(approve, loop), cancel, filename)
        return RunResult._from_native(text, store)

    def __repr__(self) -> str:
        return repr(self._native).replace("ravi Sandbox", "ravi.Sandbox")
