"""Shared fixtures. The tests run against the installed wheel (``import ravi``), never the
source folder: ``cargo xtask test`` builds the wheel with maturin and installs it first."""

from __future__ import annotations

import os
import pathlib

import pytest

import ravi

#: Set by ``cargo xtask test``: a framework or a peer that is missing fails its tests instead
#: of skipping them.
REQUIRED = os.environ.get("RAVI_REQUIRE_PYTHON_EXTRAS", "0") not in ("", "0")

#: Set by ``cargo xtask test`` unless it was told to run without the MCP harness: a missing
#: harness then fails the MCP tests instead of skipping them.
HARNESS_REQUIRED = os.environ.get("RAVI_REQUIRE_MCP_HARNESS", "0") not in ("", "0")


def need(module: str):
    """Imports ``module`` or skips (fails when ``RAVI_REQUIRE_PYTHON_EXTRAS`` is set)."""
    if REQUIRED:
        import importlib

        return importlib.import_module(module)
    return pytest.importorskip(module)


def harness_home() -> pathlib.Path:
    return pathlib.Path(os.environ.get("MCP_HARNESS_HOME") or pathlib.Path.home() / ".cache/mcp-harness")


@pytest.fixture(scope="session")
def sandbox() -> ravi.Sandbox:
    sb = ravi.Sandbox(timeout_s=20)
    sb.warm_up()
    return sb


@pytest.fixture
def workspace(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "notes.txt").write_text("alpha\nbeta\n")
    return tmp_path
