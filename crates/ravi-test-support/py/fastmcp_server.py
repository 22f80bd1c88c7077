"""A stdio MCP server built with FastMCP 4.1 (the other Python framework peers meet), serving
Tasks and Skills the way FastMCP serves them.

    fastmcp_server.py SKILLS_DIR

Needs fastmcp and its task engine, the package fastmcp-tasks (Docket, run here on its in-memory
backend, memory://, so nothing external runs); without fastmcp-tasks it exits at once, saying so.

Tools:
  research(topic) -> "findings on TOPIC": task mode "required", so it runs ONLY as a task; takes
      about a second, reporting progress that tasks/get shows as statusMessage meanwhile.
  echo(text) -> text: a plain tool.
Skills: every folder under SKILLS_DIR holding a SKILL.md (with name and description front matter).

FastMCP serves both as 2026-07-28 extensions, reached through server/discover, whose
capabilities.extensions lists io.modelcontextprotocol/tasks and io.modelcontextprotocol/skills:
  Tasks, SEP-2663: the client opts in on each request with
      _meta["io.modelcontextprotocol/clientCapabilities"].extensions["io.modelcontextprotocol/tasks"]
      = {}. tools/call research then answers a flat CreateTaskResult {"resultType": "task",
      "taskId", "status": "working", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"};
      tasks/get {"taskId"} answers the task (resultType "complete") and, once it is "completed",
      the CallToolResult inlined as "result"; tasks/cancel and tasks/update exist too, tasks/result
      does not. Without the opt-in, tools/call research is error -32021 with data
      {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}.
  Skills, SEP-2640: skills/list, and skills/get {"uri": "skill://NAME/SKILL.md"}, give each skill's
      uri, front matter and files (uri, "sha256:..." digest, size). The files are also resources:
      skill://NAME/SKILL.md and skill://NAME/_manifest in resources/list, the other files through
      the template skill://NAME/{path*}.
Over an initialize handshake (2025-11-25 and older) only the resources remain: the capabilities
name no tasks and no extensions, tools/list shows research with execution {"taskSupport":
"required"} (the 2026-07-28 listing has no execution field) yet every call of it, with or without
the 2025-11-25 `task` param, is error -32021, and tasks/* and skills/* are -32601.
"""
import asyncio
import sys
from pathlib import Path

from fastmcp import Context, FastMCP
from fastmcp.server.providers.skills import SkillsDirectoryProvider
from fastmcp.skills.extension import SkillsExtension
from fastmcp.utilities.tasks import TaskConfig

try:
    from fastmcp_tasks import TasksExtension
except ImportError:
    sys.exit(
        "fastmcp_server.py: the package fastmcp-tasks (FastMCP's task engine) is not installed"
    )

if len(sys.argv) != 2:
    sys.exit("usage: fastmcp_server.py SKILLS_DIR")
skills_dir = Path(sys.argv[1])

mcp = FastMCP("fastmcp-peer")


@mcp.tool(task=TaskConfig(mode="required"))
async def research(topic: str, ctx: Context) -> str:
    """Researches `topic` for about a second. Runs only as a task."""
    await ctx.report_progress(0, 2, f"researching {topic}")
    await asyncio.sleep(0.5)
    await ctx.report_progress(1, 2, f"writing up {topic}")
    await asyncio.sleep(0.5)
    await ctx.report_progress(2, 2, "done")
    return f"findings on {topic}"


@mcp.tool
def echo(text: str) -> str:
    """Returns `text`."""
    return text


# experimental_skills: the SEP-2640 skills/list and skills/get methods (without it the skills are
# only resources). The provider has to be on the server before the extension that names it.
skills = SkillsDirectoryProvider(roots=skills_dir, experimental_skills=True)
mcp.add_provider(skills)
mcp.add_extension(SkillsExtension(providers=[skills]))
# The task engine: Docket on its in-memory backend, in this process.
mcp.add_extension(TasksExtension(url="memory://"))

if __name__ == "__main__":
    mcp.run("stdio", show_banner=False)
