"""JSON Schemas from Python signatures, descriptions from docstrings.

Written here rather than taken from pydantic so that ``ravi`` has no dependencies: pydantic
models (and anything pydantic's ``TypeAdapter`` understands) are used when pydantic is
installed, and the common annotations are mapped by hand otherwise.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import re
import types
import typing
from typing import Any, Callable

_NONE_TYPE = type(None)

_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Returns|Return|Raises|Yields|Examples?|Notes?)\s*:?\s*$"
)
_NUMPY_RULE = re.compile(r"^\s*-{3,}\s*$")
_SPHINX_PARAM = re.compile(r"^\s*:param\s+(?:[^:]+\s+)?(\w+)\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Splits a docstring into the description and the per-parameter descriptions.

    Understands Google style (``Args:``), NumPy style (``Parameters`` over a rule) and Sphinx
    style (``:param x: ...``).
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    base_indent: int | None = None
    numpy_style = False
    i = 0
    while i < len(lines):
        line = lines[i]
        sphinx = _SPHINX_PARAM.match(line)
        if sphinx:
            current = sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            section = "sphinx"
            i += 1
            continue
        if line.strip().startswith(":") and section == "sphinx":
            current = None
            i += 1
            continue
        head = _SECTION.match(line)
        numpy_head = i + 1 < len(lines) and _NUMPY_RULE.match(lines[i + 1]) and line.strip()
        if head or numpy_head:
            name = (head.group(1) if head else line.strip()).lower()
            section = "args" if name in ("args", "arguments", "parameters", "params") else "other"
            current = None
            base_indent = None
            numpy_style = bool(numpy_head) or bool(
                head and i + 1 < len(lines) and _NUMPY_RULE.match(lines[i + 1])
            )
            i += 2 if numpy_head and not head else 1
            if head and i < len(lines) and _NUMPY_RULE.match(lines[i]):
                i += 1
            continue
        if section is None:
            description.append(line)
        elif section == "args" and line.strip():
            indent = len(line) - len(line.lstrip())
            if base_indent is None:
                base_indent = indent
            google = re.match(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", line)
            numpy = re.match(r"^\s*(\w+)\s*(?::.*)?$", line)
            if indent <= base_indent and numpy_style and numpy:
                current = numpy.group(1)
                params[current] = ""
            elif indent <= base_indent and google:
                current = google.group(1)
                params[current] = google.group(2).strip()
            elif indent <= base_indent and numpy:
                current = numpy.group(1)
                params[current] = ""
            elif current:
                params[current] = (params[current] + " " + line.strip()).strip()
        elif section == "sphinx" and current and line.strip():
            params[current] = (params[current] + " " + line.strip()).strip()
        i += 1
    text = "\n".join(description).strip()
    return text, {k: v for k, v in params.items()}


def _pydantic_schema(annotation: Any) -> dict[str, Any] | None:
    try:
        from pydantic import TypeAdapter
    except ImportError:
        return None
    try:
        return TypeAdapter(annotation).json_schema()
    except Exception:
        return None


def _is_pydantic_model(annotation: Any) -> bool:
    return inspect.isclass(annotation) and hasattr(annotation, "model_json_schema")


def schema_for(annotation: Any, where: str) -> dict[str, Any]:
    """The JSON Schema of one annotation; ``where`` names it in errors."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        inner = schema_for(args[0], where)
        for meta in args[1:]:
            if isinstance(meta, str):
                inner = {**inner, "description": meta}
            elif getattr(meta, "description", None):
                inner = {**inner, "description": meta.description}
        return inner
    if annotation is str:
        return {"type": "string"}
    if annotation is bool:
        return {"type": "boolean"}
    if annotation is int:
        return {"type": "integer"}
    if annotation is float:
        return {"type": "number"}
    if annotation is None or annotation is _NONE_TYPE:
        return {"type": "null"}
    if annotation in (dict, typing.Dict):
        return {"type": "object"}
    if annotation in (list, tuple, set, frozenset, typing.List):
        return {"type": "array"}
    if origin is typing.Literal:
        values = list(args)
        return {"enum": values}
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not _NONE_TYPE]
        schemas = [schema_for(a, where) for a in members]
        if len(members) < len(args):
            schemas.append({"type": "null"})
        return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    if origin in (list, tuple, set, frozenset) or (
        origin is not None and inspect.isclass(origin) and issubclass(origin, (list, tuple))
    ):
        if origin is tuple and args and args[-1] is not Ellipsis:
            return {
                "type": "array",
                "prefixItems": [schema_for(a, where) for a in args],
                "minItems": len(args),
                "maxItems": len(args),
            }
        item = args[0] if args else Any
        return {"type": "array", "items": schema_for(item, where)}
    if origin is dict or (inspect.isclass(origin) and issubclass(origin, dict)):
        value = args[1] if len(args) == 2 else Any
        return {"type": "object", "additionalProperties": schema_for(value, where)}
    if inspect.isclass(annotation) and issubclass(annotation, enum.Enum):
        return {"enum": [m.value for m in annotation]}
    if _is_pydantic_model(annotation):
        return annotation.model_json_schema()
    if dataclasses.is_dataclass(annotation) or typing.is_typeddict(annotation):
        hints = typing.get_type_hints(annotation, include_extras=True)
        props = {k: schema_for(v, f"{where}.{k}") for k, v in hints.items()}
        if dataclasses.is_dataclass(annotation):
            required = [
                f.name
                for f in dataclasses.fields(annotation)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            ]
        else:
            required = sorted(getattr(annotation, "__required_keys__", props.keys()))
        return {
            "type": "object",
            "properties": props,
            "required": required,
            "additionalProperties": False,
        }
    fallback = _pydantic_schema(annotation)
    if fallback is not None:
        return fallback
    raise TypeError(
        f"{where}: the annotation {annotation!r} has no JSON Schema; use str, int, float, bool, "
        "list, dict, Literal, Optional, an Enum, a dataclass, a TypedDict or a pydantic model, "
        "or give the tool a schema with @ravi.tool(parameters=...)"
    )


def _jsonable_default(value: Any) -> Any:
    try:
        import json

        json.dumps(value)
        return value
    except (TypeError, ValueError):
        if isinstance(value, enum.Enum):
            return value.value
        return None


def signature_schema(fn: Callable[..., Any], name: str) -> tuple[str, dict[str, Any], dict[str, Callable[[Any], Any]]]:
    """The description, the arguments' JSON Schema and the converters of structured arguments
    (dataclasses, pydantic models, enums) of ``fn``."""
    description, param_docs = parse_docstring(inspect.getdoc(fn))
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as e:
        raise TypeError(f"tool {name!r}: its signature cannot be read ({e})") from None
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:
        hints = {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    converters: dict[str, Callable[[Any], Any]] = {}
    for pname, param in sig.parameters.items():
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise TypeError(
                f"tool {name!r}: parameter {pname!r} is *args/**kwargs, which a schema cannot "
                "describe; name each argument"
            )
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(
                f"tool {name!r}: parameter {pname!r} is positional-only; a script calls tools "
                "with keyword arguments"
            )
        annotation = hints.get(pname, param.annotation)
        schema = dict(schema_for(annotation, f"tool {name!r}, parameter {pname!r}"))
        if pname in param_docs and param_docs[pname] and "description" not in schema:
            schema["description"] = param_docs[pname]
        if param.default is inspect.Parameter.empty:
            required.append(pname)
        else:
            default = _jsonable_default(param.default)
            if default is not None:
                schema["default"] = default
        properties[pname] = schema
        conv = _converter(annotation)
        if conv is not None:
            converters[pname] = conv
    parameters = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    return description, parameters, converters


def _converter(annotation: Any) -> Callable[[Any], Any] | None:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _converter(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not _NONE_TYPE]
        if len(members) == 1:
            inner = _converter(members[0])
            if inner is not None:
                return lambda v: None if v is None else inner(v)
        return None
    if _is_pydantic_model(annotation):
        return annotation.model_validate
    if inspect.isclass(annotation) and issubclass(annotation, enum.Enum):
        return annotation
    if dataclasses.is_dataclass(annotation) and inspect.isclass(annotation):
        return lambda v: annotation(**v) if isinstance(v, dict) else v
    return None
