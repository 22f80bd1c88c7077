# The code-mode prelude: the names every script sees besides its tools.
# Executed once when the guest is pre-initialised; the exported names (`__all__`) are put
# into builtins then, so every script sees them. Tools are native `_ravi_host.Tool` objects
# bound in each run's globals. Values cross the bridge natively (the Rust
# side converts dict/list/str/int/float/bool/None), never through Python's json module.
import _ravi_host

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
    """A tool call failed. `.tool` is the tool's name, `.status` the invoker's status
    (error, timeout, cancelled, ...), `.message` what went wrong."""

    def __init__(self, message, tool=None, status="error"):
        super().__init__(message)
        self.message = message
        self.tool = tool
        self.status = status


class ToolDenied(ToolError):
    """The call was refused: by policy, by a human, or because the tool may not be called
    from a script. `.message` holds the reason."""


class BudgetExhausted(Exception):
    """The chain has used all the tool calls (or time) it was given."""

    def __init__(self, message, tool=None, status="budget_exhausted"):
        super().__init__(message)
        self.message = message
        self.tool = tool
        self.status = status


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
    """A media file a tool produced (image, audio, ...), stored in the workspace at
    `.path`. Pass it (or its path) to another tool."""

    __slots__ = ("path", "media_type", "size")

    def __init__(self, path, media_type=None, size=None):
        self.path = path
        self.media_type = media_type
        self.size = size

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
