"""Writes each data-corpus script's `.expected`: what host CPython prints for it, with pandas
3.0.6 (the version in the CPython engine) and the tools stood in for by plain functions over
`fixtures/`. Run it with the benchmark's venv (`cargo xtask bench chain_cpython` makes
`~/.cache/ravi-bench/pandas`): `~/.cache/ravi-bench/pandas/bin/python expected.py`. The test
(`tests/suite/cpython.rs`) then holds the sandbox to these bytes."""

import contextlib
import io
import os
import pathlib
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")

HERE = pathlib.Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"


def read_file(path):
    return (FIXTURES / path).read_text()


def main():
    with tempfile.TemporaryDirectory() as out:

        def write_file(path, content):
            (pathlib.Path(out) / path).write_text(content)
            return f"wrote {path}"

        for script in sorted(HERE.glob("[0-9]*.py")):
            buf = io.StringIO()
            scope = {"__name__": "__main__", "read_file": read_file, "write_file": write_file}
            with contextlib.redirect_stdout(buf):
                exec(compile(script.read_text(), script.name, "exec"), scope)
            script.with_suffix(".expected").write_text(buf.getvalue())
            print(f"{script.name}: {len(buf.getvalue())} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
