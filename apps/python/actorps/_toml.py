"""TOML text from Python values: how the package's objects render their
part of a job (the job itself is parsed by the C++ loader, so that a bad
value is reported as the ``actorps`` program reports it)."""

import json
import math

__all__ = ["value", "table", "document"]


def value(v):
    """One TOML value: a string, bool, int, float, list or inline table."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a TOML basic string
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(x) for x in v) + "]"
    if hasattr(v, "item"):  # a numpy scalar
        return value(v.item())
    raise TypeError(f"no TOML value for {type(v).__name__}: {v!r}")


def _key(k):
    k = str(k)
    if k and all(c.isalnum() or c in "_-" for c in k):
        return k
    return json.dumps(k)


def _array_of_tables(v):
    return isinstance(v, (list, tuple)) and len(v) > 0 and all(isinstance(x, dict) for x in v)


def table(name, entries, arrays=True):
    """``[name]`` with `entries` (a dict; None values are left out); a list of
    dicts becomes ``[[name.key]]`` tables when `arrays`."""
    lines = [f"[{name}]"]
    later = []
    for k, v in entries.items():
        if v is None:
            continue
        if arrays and _array_of_tables(v):
            later.append((k, v))
        else:
            lines.append(f"{_key(k)} = {value(v)}")
    for k, items in later:
        for item in items:
            lines.append("")
            lines.append(f"[[{name}.{_key(k)}]]")
            lines.extend(f"{_key(ik)} = {value(iv)}" for ik, iv in item.items() if iv is not None)
    return "\n".join(lines) + "\n"


def document(*parts):
    """Tables' texts joined into one document."""
    return "\n".join(p for p in parts if p)
