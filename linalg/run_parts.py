"""The typed parts of a run document (:class:`~starchol.linalg.record.RunRecord`): the
mixed-precision solve, memory, trace and kernel counts of ``starchol run``, and the rules
that read, write and describe any such part from its type hints alone:

- :func:`parse`: a JSON value read as a type (a dataclass, ``Optional``, ``List``,
  ``Dict[str, X]``, ``int``, ``float``, ``str``, ``bool``, ``Any``), or ValueError
  naming the key (``mixed.iterations``); a field's ``metadata`` may bound it
  (``minimum``) or list its values (``choices``);
- :func:`plain`: the JSON value of a part;
- :func:`json_schema` and :func:`validate`: the JSON Schema (draft 2020-12 subset:
  ``type``, ``properties``, ``required``, ``additionalProperties``, ``items``,
  ``anyOf``, ``enum``, ``minimum``, ``$ref``) generated from the types, and a check of a
  document against it.

Units: bytes, seconds (``*_s``), milliseconds (``*_ms``), as the names say.
"""
import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ..integers import is_int
from ..model.mixed_volume import FALLBACKS as MIXED_FALLBACKS


@dataclass
class KernelCount:
    """Tasks of one kernel run by CPU and by CUDA workers (summed over the ranks)."""

    cpu: int = field(default=0, metadata={"minimum": 0})
    cuda: int = field(default=0, metadata={"minimum": 0})


@dataclass
class MemoryRecord:
    """Memory of a run, in bytes: tile storage per node (the model, every slice's copies
    held at once), each rank's peak resident memory (getrusage) and the model's peak
    per rank (:func:`starchol.model.memory.node_memory`, what the pre-flight check and
    ``starchol plan`` use)."""

    tile_bytes_per_node: List[int]
    tile_bytes_max: int
    peak_rss_bytes_per_rank: List[int]
    model_peak_bytes_per_rank: List[int]
    note: str = ""


@dataclass
class TraceRecord:
    """What the execution trace of ``starchol run --trace DIR`` holds: its folder, tasks
    per kernel, span (ms), MPI transfers and their bytes, and the critical path's
    figures (``makespan_ms``, ``length_ms``, ``split_ms``, ``kernels``, ``transfers``)
    when it was found."""

    dir: str
    kernels: Dict[str, int]
    span_ms: float
    comms: int
    comm_bytes: int
    critical_path: Optional[Dict[str, Any]] = None


@dataclass
class MixedRecord:
    """The mixed-precision solve (``starchol run --dtype mixed``,
    :func:`~starchol.linalg.mixed.solve_mixed`): refinement iterations, the fallback
    to float64 (None, or one of :data:`MIXED_FALLBACKS`) and why, the backward error and
    its tolerance, the history of backward errors, seconds per phase, bytes per phase
    (measured and predicted, P x P per phase), the factor's dtype; ``starchol run``
    adds where B came from, whether log det is exact and where X went."""

    iterations: int = field(metadata={"minimum": 0})
    fallback: Optional[str] = field(metadata={"choices": MIXED_FALLBACKS})
    fallback_reason: Optional[str]
    converged: bool
    backward_error: float
    tolerance: float
    history: List[float]
    time_s: Dict[str, float]
    bytes_measured_phase_pairs: Optional[Dict[str, List[List[float]]]]
    bytes_predicted_phase_pairs: Optional[Dict[str, List[List[float]]]]
    factor_dtype: str
    rhs: Optional[str] = None
    logdet_exact: Optional[bool] = None
    solution: Optional[str] = None


# -- reading a part by its type ------------------------------------------------------------
def _args(tp):
    return typing.get_args(tp)


def _is_optional(tp):
    return typing.get_origin(tp) is typing.Union and type(None) in _args(tp)


def _what(tp):
    """A type in words, for messages."""
    if _is_optional(tp):
        return f"{_what(next(a for a in _args(tp) if a is not type(None)))} or null"
    origin = typing.get_origin(tp)
    if origin in (list, List):
        return "a list"
    if origin in (dict, Dict) or dataclasses.is_dataclass(tp):
        return "an object"
    return {int: "an integer", float: "a number", str: "a text", bool: "true or false"}.get(
        tp, "a value")


def parse(tp, value, key, resolve=None):
    """``value`` (plain JSON) read as ``tp``; ValueError naming ``key`` when it is not.
    ``resolve(name, value, key)`` reads a type given by name (a forward reference such
    as ``"RunRecord"``)."""
    if isinstance(tp, (str, typing.ForwardRef)):
        name = tp if isinstance(tp, str) else tp.__forward_arg__
        return resolve(name, value, key)
    if tp is Any:
        return value
    if _is_optional(tp):
        if value is None:
            return None
        inner = [a for a in _args(tp) if a is not type(None)]
        return parse(inner[0], value, key, resolve)
    origin = typing.get_origin(tp)
    wrong = ValueError(f"key {key!r} must be {_what(tp)}, got {value!r}")
    if origin in (list, List):
        if not isinstance(value, list):
            raise wrong
        return [parse(_args(tp)[0], v, f"{key}[{i}]", resolve) for i, v in enumerate(value)]
    if origin in (dict, Dict):
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise wrong
        return {k: parse(_args(tp)[1], v, f"{key}.{k}", resolve) for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):               # the part itself, already typed
            return value
        if hasattr(tp, "from_dict"):            # a document of its own (a nested record)
            return resolve(tp.__name__, value, key)
        return _parse_dataclass(tp, value, key, resolve)
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = is_int(value)
    elif tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    else:
        ok = isinstance(value, tp)
    if not ok:
        raise wrong
    return value


def _parse_dataclass(tp, value, key, resolve):
    if not isinstance(value, dict):
        raise ValueError(f"key {key!r} must be an object, got {value!r}")
    hints = typing.get_type_hints(tp)
    known = {f.name: f for f in dataclasses.fields(tp)}
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise ValueError(f"key {key!r} has unknown key(s) {', '.join(map(repr, unknown))}")
    out = {}
    for name, f in known.items():
        sub = f"{key}.{name}"
        if name not in value:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ValueError(f"key {key!r} lacks its key {name!r}")
            continue
        v = parse(hints[name], value[name], sub, resolve)
        low = f.metadata.get("minimum")
        if low is not None and v is not None and v < low:
            raise ValueError(f"key {sub!r} must be {_what(hints[name])} >= {low}, got {v!r}")
        choices = f.metadata.get("choices")
        if choices is not None and v is not None and v not in choices:
            raise ValueError(f"key {sub!r} must be null or one of {', '.join(choices)}, "
                             f"got {v!r}")
        out[name] = v
    return tp(**out)


def plain(value):
    """The JSON value of a part (dataclasses as objects, numpy values as numbers and
    lists; an object with ``to_dict`` through it)."""
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


# -- the schema ------------------------------------------------------------------------------
def json_schema(tp, refs=None):
    """The JSON Schema of ``tp``, generated from its type hints (see the module
    docstring); ``refs`` maps a forward reference's name to its ``$ref``."""
    refs = refs or {}
    if isinstance(tp, (str, typing.ForwardRef)):
        name = tp if isinstance(tp, str) else tp.__forward_arg__
        return {"$ref": refs[name]}
    if tp is Any:
        return {}
    if _is_optional(tp):
        inner = [a for a in _args(tp) if a is not type(None)]
        return {"anyOf": [json_schema(inner[0], refs), {"type": "null"}]}
    origin = typing.get_origin(tp)
    if origin in (list, List):
        return {"type": "array", "items": json_schema(_args(tp)[0], refs)}
    if origin in (dict, Dict):
        return {"type": "object", "additionalProperties": json_schema(_args(tp)[1], refs)}
    if dataclasses.is_dataclass(tp):
        if tp.__name__ in refs:                 # a document of its own: its reference
            return {"$ref": refs[tp.__name__]}
        return dataclass_schema(tp, refs)
    return {"type": {bool: "boolean", int: "integer", float: "number", str: "string",
                     dict: "object", list: "array"}[tp]}


def dataclass_schema(tp, refs=None, closed=True, skip=()):
    """The object schema of the dataclass ``tp``: its fields (but ``skip``), required
    when they have no default, no other key when ``closed``."""
    hints = typing.get_type_hints(tp)
    props, required = {}, []
    for f in dataclasses.fields(tp):
        if f.name in skip:
            continue
        schema = json_schema(hints[f.name], refs)
        if "minimum" in f.metadata:
            schema = _bounded(schema, {"minimum": f.metadata["minimum"]})
        if "choices" in f.metadata:
            schema = _bounded(schema, {"enum": [*f.metadata["choices"], None]})
        if f.default is None and "anyOf" not in schema:     # None until it is known
            schema = {"anyOf": [schema, {"type": "null"}]}
        props[f.name] = schema
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(f.name)
    out = {"type": "object", "properties": props, "additionalProperties": not closed}
    if required:
        out["required"] = required
    return out


def _bounded(schema, more):
    if "anyOf" in schema:
        return {"anyOf": [_bounded(schema["anyOf"][0], more), *schema["anyOf"][1:]]}
    return {**schema, **more}


_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool,
          "null": type(None)}


def _type_ok(name, value):
    if name == "integer":
        return is_int(value)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[name])


def validate(schema, value, root=None, where="$"):
    """The first way ``value`` breaks ``schema`` (the subset :func:`json_schema`
    writes), as text, or None when it conforms. ``$ref`` is resolved in ``root``
    (default: ``schema``): ``#`` or ``#/$defs/NAME``."""
    root = schema if root is None else root
    if "$ref" in schema:
        ref = schema["$ref"]
        target = root if ref == "#" else root["$defs"][ref.rsplit("/", 1)[1]]
        return validate(target, value, root, where)
    if "anyOf" in schema:
        found = [validate(s, value, root, where) for s in schema["anyOf"]]
        return None if None in found else found[0]
    kind = schema.get("type")
    if kind is not None and not _type_ok(kind, value):
        return f"{where}: {value!r} is not of type {kind}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where}: {value!r} is not one of {schema['enum']}"
    if "minimum" in schema and value < schema["minimum"]:
        return f"{where}: {value!r} is below {schema['minimum']}"
    if kind == "array":
        for i, item in enumerate(value):
            found = validate(schema.get("items", {}), item, root, f"{where}[{i}]")
            if found:
                return found
    if kind == "object":
        props = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                return f"{where}: the required key {name!r} is missing"
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in props:
                found = validate(props[name], item, root, f"{where}.{name}")
            elif extra is False:
                found = f"{where}: the key {name!r} is not in the schema"
            elif isinstance(extra, dict):
                found = validate(extra, item, root, f"{where}.{name}")
            else:
                found = None
            if found:
                return found
    return None


__all__ = ["KernelCount", "MIXED_FALLBACKS", "MemoryRecord", "MixedRecord", "TraceRecord",
           "dataclass_schema", "json_schema", "parse", "plain", "validate"]
