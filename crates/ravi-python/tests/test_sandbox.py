"""ravi.Sandbox through the installed wheel: runs, tools, the invoker's gates, limits."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import threading
import time
import warnings
from typing import Literal, Optional

import pytest

import ravi


def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


def test_a_script_calls_a_plain_function_through_the_invoker(sandbox):
    r = sandbox.run("x = add(a=2, b=3)\nprint(x * 10)", tools=[add])
    assert r.status == "ok", r
    assert r.ok
    assert r.output == "50\n"
    assert r.error is None
    assert [(c.tool, c.status, c.executed) for c in r.calls] == [("add", "ok", True)]
    assert r.calls[0].duration_ms >= 0
    assert r.calls[0].args_digest.startswith("sha256:")
    assert "[calls] 1: add ok" in r.summary
    assert r.to_dict()["status"] == "ok"


def test_structured_results_reach_the_script_as_python_values(sandbox):
    @dataclasses.dataclass
    class Point:
        x: int
        y: int

    def lookup(name: str) -> dict:
        """Looks a record up."""
        return {"name": name, "tags": ("a", "b"), "where": Point(1, 2), "n": None}

    r = sandbox.run(
        "r = lookup(name='z')\nprint(r['name'], r['tags'], r['where']['y'], r['n'])",
        tools=[lookup],
    )
    assert r.output == "z ['a', 'b'] 2 None\n", r


def test_arguments_are_validated_against_the_schema_from_the_annotations(sandbox):
    r = sandbox.run(
        "try:\n    add(a='two', b=3)\nexcept ToolError as e:\n    print(e.reason)\n", tools=[add]
    )
    assert r.output == "invalid_arguments\n", r
    assert r.calls[0].status == "invalid_arguments" or not r.calls[0].executed


def test_an_exception_in_a_tool_reaches_the_script_as_tool_error_with_its_message(sandbox):
    def flaky(n: int) -> int:
        raise ValueError(f"no {n}")

    r = sandbox.run(
        "try:\n    flaky(n=3)\nexcept ToolError as e:\n    print('caught', e.message)\nflaky(n=4)\n",
        tools=[flaky],
    )
    assert r.status == "error"
    assert r.output.startswith("caught ValueError: no 3\n"), r.output
    assert r.error_type == "ToolError"
    assert "ValueError: no 4" in r.error
    assert [c.status for c in r.calls] == ["error", "error"]


def test_an_uncaught_script_error_is_the_result_not_an_exception(sandbox):
    r = sandbox.run("print('before')\n1 / 0\n")
    assert r.status == "error"
    assert r.output == "before\n"
    assert r.error_type == "ZeroDivisionError"
    assert "line 2" in (r.traceback or "")


def test_risky_tools_are_denied_without_approve_and_asked_with_it(sandbox):
    deleted = []

    @ravi.tool(risk="high")
    def delete(path: str) -> str:
        """Deletes a file."""
        deleted.append(path)
        return f"deleted {path}"

    script = "try:\n    print(delete(path='a'))\nexcept ToolDenied as e:\n    print('denied:', e.reason)\n"
    r = sandbox.run(script, tools=[delete])
    assert r.output == "denied: approval_denied\n", r
    assert deleted == []
    assert r.calls[0].status == "denied" and not r.calls[0].executed

    asked = []

    def approve(req: ravi.ApprovalRequest) -> bool:
        asked.append(req)
        return req.arguments == {"path": "a"}

    r = sandbox.run(script + "print(delete(path='b'))\n", tools=[delete], approve=approve)
    assert deleted == ["a"], r
    assert r.output.startswith("deleted a\n")
    assert [q.tool for q in asked] == ["delete", "delete"]
    assert asked[0].risk == "high" and asked[0].source == "code_mode" and asked[0].line == 2
    assert r.status == "error" and r.error_type == "ToolDenied"


def test_only_exactly_true_approves_and_a_failing_approver_denies_with_a_warning(sandbox):
    ran = []

    @ravi.tool(risk="sensitive")
    def peek(x: int) -> int:
        ran.append(x)
        return x

    r = sandbox.run("peek(x=1)", tools=[peek], approve=lambda req: "yes")
    assert r.status == "error" and ran == []

    def broken(req):
        raise RuntimeError("approver down")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = sandbox.run("peek(x=2)", tools=[peek], approve=broken)
    assert r.status == "error" and ran == []
    assert any("approver down" in str(w.message) for w in caught)


def test_async_tools_and_an_async_approver_work_from_run_and_run_async(sandbox):
    loops = []

    @ravi.tool(risk="sensitive")
    async def slow_double(x: int) -> int:
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0.01)
        return 2 * x

    async def approve(req):
        await asyncio.sleep(0)
        return True

    r = sandbox.run("print(slow_double(x=21))", tools=[slow_double], approve=approve)
    assert r.output == "42\n", r

    async def main():
        r = await sandbox.run_async("print(slow_double(x=4))", tools=[slow_double], approve=approve)
        return r, asyncio.get_running_loop()

    r, loop = asyncio.run(main())
    assert r.output == "8\n", r
    # From run_async, an async tool runs on the caller's own loop.
    assert loops[-1] is loop


def test_run_async_keeps_the_event_loop_free_and_cancelling_stops_the_script(sandbox):
    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        t = asyncio.ensure_future(ticker())
        run = asyncio.ensure_future(sandbox.run_async("while True:\n    pass\n"))
        await asyncio.sleep(0.5)
        started = time.monotonic()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        stopped_in = time.monotonic() - started
        t.cancel()
        return ticks, stopped_in

    ticks, stopped_in = asyncio.run(main())
    assert ticks >= 10, ticks
    assert stopped_in < 5, stopped_in


def test_a_runaway_script_is_stopped_by_its_time_limit_while_other_threads_run():
    sb = ravi.Sandbox(timeout_s=1.0)
    counter = 0
    stop = threading.Event()

    def spin():
        nonlocal counter
        while not stop.is_set():
            counter += 1

    th = threading.Thread(target=spin)
    th.start()
    started = time.monotonic()
    r = sb.run("print('start')\nwhile True:\n    pass\n")
    took = time.monotonic() - started
    stop.set()
    th.join()
    assert r.status == "timeout", r
    assert r.output == "start\n"
    assert 0.9 <= took < 5, took
    # The GIL was released: the other thread ran throughout.
    assert counter > 100_000, counter


def test_a_cancel_token_stops_a_run_from_another_thread():
    sb = ravi.Sandbox(timeout_s=30)
    token = ravi.CancelToken()
    threading.Timer(0.3, token.cancel).start()
    r = sb.run("while True:\n    pass\n", cancel=token)
    assert r.status == "cancelled", r
    assert token.cancelled


def test_the_call_budget_is_enforced():
    sb = ravi.Sandbox(timeout_s=20, max_tool_calls=3)
    r = sb.run(
        "n = 0\ntry:\n    for i in range(10):\n        add(a=i, b=0)\n        n += 1\n"
        "except BudgetExhausted:\n    print('stopped after', n)\n",
        tools=[add],
    )
    assert r.output == "stopped after 3\n", r
    assert [c.status for c in r.calls][:3] == ["ok", "ok", "ok"]


def test_the_memory_limit_stops_a_script_that_grows_too_large():
    sb = ravi.Sandbox(timeout_s=20, memory_mb=64)
    r = sb.run("x = []\nwhile True:\n    x.append('y' * 1_000_000)\n")
    assert r.status in ("resource_exhausted", "error"), r
    assert r.status != "ok"


def test_a_slow_tool_times_out_by_the_per_call_limit(sandbox):
    def sleepy() -> str:
        time.sleep(2)
        return "late"

    sb = ravi.Sandbox(timeout_s=10, call_timeout_s=0.3)
    r = sb.run("try:\n    sleepy()\nexcept ToolError as e:\n    print(e.status)\n", tools=[sleepy])
    assert r.output == "timeout\n", r


def test_a_large_result_is_stored_and_comes_back_as_an_artifact():
    sb = ravi.Sandbox(timeout_s=20, max_inline_result_bytes=1024)
    big = "x" * 50_000

    def dump() -> str:
        return big

    r = sb.run("a = dump()\nprint(type(a).__name__, a.size)\n", tools=[dump])
    assert r.output == "Artifact 50000\n", r
    assert len(r.artifacts) == 1
    art = r.artifacts[0]
    assert art.ref.startswith("art_") and art.size == 50_000 and art.tool == "dump"
    assert art.read() == big.encode()


def test_tool_names_are_checked_and_duplicates_refused(sandbox):
    with pytest.raises(ValueError, match=r"tools\[1\].*add"):
        sandbox.run("pass", tools=[add, add])
    with pytest.raises(TypeError, match=r"tools\[0\] is a int"):
        sandbox.run("pass", tools=[3])
    with pytest.raises(ValueError, match="name"):
        sandbox.run("pass", tools=[ravi.tool(add, name="has space")])
    renamed = ravi.tool(add, name="plus")
    assert sandbox.run("print(plus(a=1, b=1))", tools=[add, renamed]).output == "2\n"


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"timeout_s": 0}, "timeout_s"),
        ({"timeout_s": -1}, "timeout_s"),
        ({"timeout_s": "10"}, "timeout_s"),
        ({"max_tool_calls": 0}, "max_tool_calls"),
        ({"max_tool_calls": 1.5}, "max_tool_calls"),
        ({"memory_mb": 1}, "memory_mb"),
        ({"engine": "jython"}, "engine"),
        ({"call_timeout_s": 0}, "call_timeout_s"),
        ({"approval_timeout_s": 100, "timeout_s": 10}, "approval_timeout_s"),
        ({"output_bytes": 10}, "output_bytes"),
    ],
)
def test_bad_sandbox_arguments_raise_naming_the_argument(kwargs, named):
    with pytest.raises((ValueError, TypeError), match=named):
        ravi.Sandbox(**kwargs)


def test_bad_run_arguments_raise_naming_the_argument(sandbox):
    with pytest.raises(TypeError, match="code"):
        sandbox.run(b"print(1)")
    with pytest.raises(TypeError, match="approve"):
        sandbox.run("pass", approve="yes")


def test_the_cpython_engine_runs_pandas_over_tool_results_or_is_refused_clearly():
    from conftest import REQUIRED

    def sales() -> list:
        """Sales rows."""
        return [{"region": "north", "amount": 5}, {"region": "south", "amount": 7}, {"region": "north", "amount": 1}]

    sb = ravi.Sandbox(engine="cpython", timeout_s=60)
    assert sb.engine == "cpython"
    script = "import pandas as pd\ndf = pd.DataFrame(sales())\nprint(df.groupby('region')['amount'].sum().to_dict())\n"
    try:
        r = sb.run(script, tools=[sales])
    except ravi.RaviError as e:
        # `cargo xtask test` builds the wheel with the engine; a plain `pip install` has none.
        assert not REQUIRED, e
        assert "CPython engine is not in this build" in str(e)
    else:
        assert r.output == "{'north': 6, 'south': 7}\n", r
        assert [c.tool for c in r.calls] == ["sales"]


def test_many_threads_run_scripts_at_once(sandbox):
    results = [None] * 8

    def work(i):
        results[i] = sandbox.run(f"print(add(a={i}, b=1))", tools=[add]).output

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [f"{i + 1}\n" for i in range(8)]


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Box:
    w: int
    h: int = 1


def test_structured_arguments_arrive_as_their_python_types(sandbox):
    seen = {}

    def paint(box: Box, color: Color, note: Optional[str] = None) -> str:
        seen.update(box=box, color=color, note=note)
        return "ok"

    r = sandbox.run("print(paint(box={'w': 3}, color='blue'))", tools=[paint])
    assert r.output == "ok\n", r
    assert seen == {"box": Box(3, 1), "color": Color.BLUE, "note": None}


def test_the_schema_comes_from_annotations_and_the_docstring():
    def search(query: str, limit: int = 10, mode: Literal["fast", "deep"] = "fast", tags: Optional[list[str]] = None) -> list:
        """Searches the index.

        Args:
            query: What to look for.
            limit: At most this many hits.
        """
        return []

    [decl] = ravi.tool_schemas([search], provider="openai")
    fn = decl["function"]
    assert fn["name"] == "search"
    assert fn["description"] == "Searches the index."
    props = fn["parameters"]["properties"]
    assert props["query"] == {"type": "string", "description": "What to look for."}
    assert props["limit"]["type"] == "integer" and props["limit"]["default"] == 10
    assert props["mode"]["enum"] == ["fast", "deep"]
    assert fn["parameters"]["required"] == ["query"]


def test_functions_a_schema_cannot_describe_are_refused_naming_the_parameter():
    def splat(*args):
        return args

    with pytest.raises(TypeError, match="'args'"):
        ravi.tool(splat)

    class Opaque:
        pass

    def takes(o: Opaque) -> None:
        pass

    with pytest.raises(TypeError, match="parameter 'o'"):
        ravi.tool(takes)
    with pytest.raises(ValueError, match="risk='risky'"):
        ravi.tool(add, risk="risky")


def test_a_decorated_tool_is_still_a_plain_function():
    @ravi.tool(risk="sensitive", name="sum2")
    def s(a: int, b: int) -> int:
        """Sums."""
        return a + b

    assert s(1, 2) == 3
    assert s.name == "sum2" and s.risk == "sensitive" and s.description == "Sums."


def test_tool_schemas_render_every_provider():
    for provider in ("openai", "openai-responses", "anthropic", "gemini", "mcp"):
        out = ravi.tool_schemas([add], provider=provider)
        assert out, provider
        assert "add" in json.dumps(out)
    with pytest.raises(ValueError, match="provider"):
        ravi.tool_schemas([add], provider="cohere")
    strict = ravi.tool_schemas([add], provider="openai", strict=True)
    assert strict[0]["function"]["strict"] is True


def test_describe_names_each_function_and_its_signature(sandbox):
    text = sandbox.describe([add])
    assert "add(" in text and "Adds two integers." in text


def test_the_interpreter_exits_cleanly_while_an_abandoned_tool_still_runs(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "exit_early.py"
    script.write_text(
        "import time, ravi\n"
        "def sleepy() -> str:\n"
        "    time.sleep(3)\n"
        "    return 'late'\n"
        "r = ravi.Sandbox(timeout_s=10, call_timeout_s=0.2).run(\n"
        "    'try:\\n    sleepy()\\nexcept ToolError as e:\\n    print(e.status)\\n', tools=[sleepy])\n"
        "print(r.output, end='')\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "timeout\n"
    assert "Fatal" not in done.stderr
