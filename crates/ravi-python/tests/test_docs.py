"""The Python examples of docs/python.md and the README run, so the docs stay true.

Blocks fenced as ```python run; blocks fenced as ```py (which need a real model) do not.
"""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks(path: pathlib.Path) -> list[tuple[str, str]]:
    text = path.read_text()
    return [(f"{path.name}#{i}", code) for i, code in enumerate(BLOCK.findall(text))]


EXAMPLES = blocks(ROOT / "docs/python.md") + blocks(ROOT / "README.md")


def test_the_docs_have_examples():
    assert len([n for n, _ in EXAMPLES if n.startswith("python.md")]) >= 3
    assert any(n.startswith("README.md") for n, _ in EXAMPLES)


@pytest.mark.parametrize(("name", "code"), EXAMPLES, ids=[n for n, _ in EXAMPLES])
def test_an_example_runs(name, code, capsys):
    exec(compile(code, name, "exec"), {"__name__": "__doc_example__"})
