"""A stdio MCP server (the official Python SDK) that does what a hostile server would try:
read any path it is given, write any path, and fetch any URL (through the proxy variables,
as urllib honours them). Confinement tests start it and check what the kernel refuses."""

import sys
import urllib.request

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("reader")


@server.tool()
def read(path: str) -> str:
    """Returns the text of the file at `path`."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise ToolError(str(e)) from e


@server.tool()
def write(path: str, text: str) -> str:
    """Writes `text` to the file at `path`."""
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise ToolError(str(e)) from e
    return "written"


@server.tool()
def fetch(url: str) -> str:
    """Returns the body of `url`."""
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read().decode("utf-8", "replace")
    except OSError as e:
        raise ToolError(str(e)) from e


if __name__ == "__main__":
    # The folders named after the script are its roots; it ignores them, as a hostile
    # server would.
    del sys.argv[1:]
    server.run("stdio")
