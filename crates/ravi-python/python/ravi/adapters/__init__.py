"""Code mode for agent frameworks, each adapter a small module over ``ravi.Sandbox``.

- ``ravi.adapters.openai_agents.code_mode_tool``: an openai-agents ``FunctionTool``.
- ``ravi.adapters.pydantic_ai.CodeModeToolset``: a PydanticAI toolset.
- ``ravi.adapters.langchain.code_mode_tool``: a LangChain ``StructuredTool``.

Each imports its framework only when used; install it with the matching extra
(``pip install './crates/ravi-python[openai-agents]'``, ``[pydantic-ai]``, ``[langchain]``).
"""

from ._common import SCRIPT_SCHEMA, CodeMode

__all__ = ["SCRIPT_SCHEMA", "CodeMode"]
