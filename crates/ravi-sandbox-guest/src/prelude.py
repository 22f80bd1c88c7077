# The code-mode prelude: the names every script sees besides its tools.
# Executed once when the guest is pre-initialised; the exported names (`__all__`) are put
# into builtins then, so every script sees them. Tools are native `_ravi_host.Tool` objects
# bound in each run's globals. Values cross the bridge natively (the Rust
# side converts dict/list/str/int/float/bool/None), never through Python's json module.
import sys as _sys

import _ravi_host

# Line-buffered stdout and stderr: each printed line reaches the host when it ends, so what a
# script printed survives a timeout, a cancellation or a memory trap (which stop the guest
# without a final flush). The interpreter is booted with unbuffered stdio, so the text layer
# writes straight to the file descriptor: a line costs one host write and no BufferedWriter
# (whose per-line flush cost twice as much); nothing is paid per tool call or at start-up.
_sys.stdout.reconfigure(line_buffering=True, write_through=False)
_sys.stderr.reconfigure(line_buffering=True, write_through=False)

__all__ = [
    "Artifact",
    "ChainFile",
    "ToolError",
    "ToolDenied",
    "BudgetExhausted",
    "parallel",
    "budget",
]


class ToolError(Exception):
    """A tool call failed. `.tool` is the tool's name, `.status` the call's status in the
    trace (error, timeout or cancelled), `.reason` why, as the invoker classified it
    (tool_error, timeout, invalid_arguments, not_callable, unknown_tool, cancelled, ...; None
    if unknown), and `.message` what went wrong."""

    def __init__(self, message, tool=None, status="error", reason=None):
        super().__init__(message)
        self.message = message
        self.tool = tool
        self.status = status
        self.reason = reason


class ToolDenied(ToolError):
    """The call was refused by policy or by a human (`.status` is denied; `.reason` says
    which: approval_denied, skill_denied, guardrail_denied, output_withheld).
    `.message` holds the explanation."""


class BudgetExhausted(Exception):
    """The chain has used all the tool calls it was given; further calls fail too. Not a
    ToolError, so a per-call `except ToolError` does not swallow it: finish with what you
    have."""

    def __init__(self, message, tool=None, status="error", reason="budget_exhausted"):
        super().__init__(message)
        self.message = message
        self.tool = tool
        self.status = status
        self.reason = reason


class Artifact:
    """A large tool result kept on the host. Only `.preview` entered the sandbox; pass
    the Artifact itself as an argument to another tool and the host substitutes the
    full content."""

    __slots__ = ("ref", "preview", "size", "media_type")

    def __init__(self, ref, preview="", size=0, media_type=None):
        self.ref = ref
        self.preview = preview
        self.size = size
        self.media_type = media_type

    def __str__(self):
        return self.preview

    def __len__(self):
        return self.size

    def __repr__(self):
        return "Artifact(ref=%r, size=%d, media_type=%r)" % (self.ref, self.size, self.media_type)


class ChainFile:
    """A media file a tool produced (image, audio, ...), kept on the host and shown at
    `.path`. Pass the ChainFile itself to another tool and the host substitutes its bytes
    (base64 for binary media) without them entering the sandbox; `str(f)` is the path."""

    __slots__ = ("path", "media_type", "size", "ref")

    def __init__(self, path, media_type=None, size=None, ref=None):
        self.path = path
        self.media_type = media_type
        self.size = size
        self.ref = ref

    def __str__(self):
        return self.path

    def __fspath__(self):
        return self.path

    def __repr__(self):
        return "ChainFile(path=%r, media_type=%r)" % (self.path, self.media_type)


class _Call:
    __slots__ = ("name", "kwargs")

    def __init__(self, name, kwargs):
        self.name = name
        self.kwargs = kwargs

    def __repr__(self):
        return "<deferred call %s>" % self.name


def parallel(*calls, return_exceptions=False):
    """Run several tool calls concurrently; each still goes through the invoker and counts
    against the budget. Pass deferred calls: parallel(read_file.defer(path="a"),
    read_file.defer(path="b")). Returns the results in order. The first failure is raised
    unless return_exceptions=True, in which case failed calls yield their exception."""
    if len(calls) == 1 and isinstance(calls[0], (list, tuple)):
        calls = tuple(calls[0])
    batch = []
    for c in calls:
        if not isinstance(c, _Call):
            raise TypeError("parallel() takes deferred calls, e.g. parallel(tool.defer(x=1), ...)")
        batch.append((c.name, c.kwargs))
    results = _ravi_host.parallel(batch)
    out = []
    for ok, value in results:
        if not ok and not return_exceptions:
            raise value
        out.append(value)
    return out


def budget():
    """What is left of this run's budget: a dict with calls_used, calls_remaining and
    seconds_remaining."""
    return _ravi_host.budget()


def _format_exception(exc):
    import traceback

    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


_ravi_host._register(
    Artifact, ChainFile, ToolError, ToolDenied, BudgetExhausted, _Call
)
