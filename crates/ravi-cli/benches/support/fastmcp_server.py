"""The peer of `cargo xtask bench gateway`: the same calculator tool served by the official
Python SDK's high-level server (FastMCP, `mcp.server.mcpserver.MCPServer`) over streamable HTTP.

    fastmcp_server.py PORT
"""
import ast
import operator
import sys

from mcp.server.mcpserver import MCPServer

OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
       ast.Div: operator.truediv, ast.Pow: operator.pow, ast.USub: operator.neg}


def evaluate(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in OPS:
        return OPS[type(node.op)](evaluate(node.left), evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in OPS:
        return OPS[type(node.op)](evaluate(node.operand))
    raise ValueError("unsupported expression")


server = MCPServer("peer", log_level="WARNING")


@server.tool()
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression and return the number."""
    value = evaluate(ast.parse(expression, mode="eval").body)
    return str(int(value) if float(value).is_integer() else value)


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
