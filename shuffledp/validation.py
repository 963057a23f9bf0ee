"""Checks of parameters at the boundary: each raises InvalidParameterError naming rule and value.

Callers pass the name the user knows (the command-line flag where there is one), so the message
reads like ``--eps0 must be > 0, got -1``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from shuffledp.errors import InvalidParameterError

T = TypeVar("T")


def require_finite(name: str, value: float) -> float:
    """`value` as a float, or InvalidParameterError if it is not a finite real number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidParameterError(f"{name} must be a real number, got {value!r}")
    if not math.isfinite(value):
        raise InvalidParameterError(f"{name} must be finite, got {value}")
    return float(value)


def require_positive(name: str, value: float) -> float:
    """`value` as a float, or InvalidParameterError unless it is finite and > 0."""
    result = require_finite(name, value)
    if result <= 0:
        raise InvalidParameterError(f"{name} must be > 0, got {value}")
    return result


def require_int(
    name: str, value: int, low: int, high: int | None = None, *, bound: str = ""
) -> None:
    """InvalidParameterError unless ``value`` is an integer in [low, high] (high None: no cap);
    ``bound`` names where the limits come from, e.g. '[0, n_hops - 1]'."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParameterError(f"{name} must be an integer, got {value!r}")
    if high is None:
        if value < low:
            raise InvalidParameterError(f"{name} must be >= {low}, got {value}")
    elif not low <= value <= high:
        where = f"{bound} = " if bound else ""
        raise InvalidParameterError(f"{name} must be in {where}[{low}, {high}], got {value}")


# ---------------------------------------------------------------------------------------------
# JSON objects read back into records (each record's ``from_json``)

#: A value JSON can hold (what ``json.loads`` returns).
JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]
#: A JSON object.
JsonObject = dict[str, JsonValue]


def require_keys(
    name: str, data: object, required: Iterable[str], optional: Iterable[str] = ()
) -> Mapping[str, object]:
    """``data`` as a JSON object holding every ``required`` key and nothing but those and the
    ``optional`` ones; InvalidParameterError naming the missing or unknown keys otherwise."""
    if not isinstance(data, Mapping) or not all(isinstance(key, str) for key in data):
        raise InvalidParameterError(f"{name} must be a JSON object, got {_kind(data)}")
    wanted = list(required)
    missing = [key for key in wanted if key not in data]
    if missing:
        raise InvalidParameterError(f"{name} is missing key(s) {', '.join(map(repr, missing))}")
    allowed = set(wanted) | set(optional)
    unknown = [key for key in data if key not in allowed]
    if unknown:
        raise InvalidParameterError(
            f"{name} has unknown key(s) {', '.join(map(repr, unknown))}; allowed: "
            f"{', '.join(sorted(allowed))}"
        )
    return data


def require_json_object(name: str, data: object) -> JsonObject:
    """``data`` as a JSON object (a copy) made only of JSON values: str keys; None, bool, int,
    finite float, str, lists and objects of them. InvalidParameterError names the first path
    that is not."""
    value = require_json_value(name, data)
    if not isinstance(value, dict):
        raise InvalidParameterError(f"{name} must be a JSON object, got {_kind(data)}")
    return value


def require_json_value(name: str, data: object) -> JsonValue:
    """``data`` as a JSON value (a deep copy; tuples become lists), or InvalidParameterError."""
    if data is None or isinstance(data, bool | int | str):
        return data
    if isinstance(data, float):
        return require_finite(name, data)
    if isinstance(data, list | tuple):
        return [require_json_value(f"{name}[{i}]", item) for i, item in enumerate(data)]
    if isinstance(data, Mapping):
        out: JsonObject = {}
        for key, item in data.items():
            if not isinstance(key, str):
                raise InvalidParameterError(f"{name} must have string keys, got {key!r}")
            out[key] = require_json_value(f"{name}.{key}", item)
        return out
    raise InvalidParameterError(f"{name} must be a JSON value, got {_kind(data)}")


def require_str(name: str, value: object, *, empty: bool = False) -> str:
    """``value`` as a string (non-empty unless ``empty``), or InvalidParameterError."""
    if not isinstance(value, str):
        raise InvalidParameterError(f"{name} must be a string, got {_kind(value)}")
    if not value and not empty:
        raise InvalidParameterError(f"{name} must be a non-empty string, got ''")
    return value


def require_bool(name: str, value: object) -> bool:
    """``value`` as a bool (true or false, not 0 or 1), or InvalidParameterError."""
    if not isinstance(value, bool):
        raise InvalidParameterError(f"{name} must be true or false, got {value!r}")
    return value


def require_number(
    name: str,
    value: object,
    *,
    low: float | None = None,
    high: float | None = None,
    infinite: bool = False,
) -> float:
    """``value`` (an int or a float, not a bool) as a float in [low, high]; infinite values
    only with ``infinite`` (NaN never). InvalidParameterError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidParameterError(f"{name} must be a number, got {_kind(value)}")
    result = float(value)
    if math.isnan(result) or (math.isinf(result) and not infinite):
        raise InvalidParameterError(f"{name} must be finite, got {value}")
    if low is not None and result < low:
        raise InvalidParameterError(f"{name} must be >= {low}, got {value}")
    if high is not None and result > high:
        raise InvalidParameterError(f"{name} must be <= {high}, got {value}")
    return result


def require_counts(name: str, value: object, *, length: int | None = None) -> tuple[int, ...]:
    """``value`` (a list or tuple of integers >= 0, of ``length`` if given) as a tuple."""
    if not isinstance(value, list | tuple):
        raise InvalidParameterError(f"{name} must be a list of counts, got {_kind(value)}")
    if length is not None and len(value) != length:
        raise InvalidParameterError(f"{name} must hold {length} counts, got {len(value)}")
    for index, item in enumerate(value):
        require_int(f"{name}[{index}]", item, 0)
    return tuple(value)


def require_numbers(name: str, value: object, *, length: int | None = None) -> tuple[float, ...]:
    """``value`` (a list or tuple of finite numbers, of ``length`` if given) as floats."""
    if not isinstance(value, list | tuple):
        raise InvalidParameterError(f"{name} must be a list of numbers, got {_kind(value)}")
    if length is not None and len(value) != length:
        raise InvalidParameterError(f"{name} must hold {length} numbers, got {len(value)}")
    return tuple(require_number(f"{name}[{i}]", item) for i, item in enumerate(value))


def require_counter(name: str, value: object) -> Mapping[str, int]:
    """``value`` (an object of name -> integer >= 0) as a read-only mapping, order kept."""
    if not isinstance(value, Mapping):
        raise InvalidParameterError(f"{name} must be a JSON object of counts, got {_kind(value)}")
    for key, count in value.items():
        require_str(f"{name} key", key)
        require_int(f"{name}[{key!r}]", count, 0)
    return MappingProxyType(dict(value))


def optional(check: Callable[..., T], name: str, value: object, **kwargs: Any) -> T | None:
    """None for None, otherwise ``check(name, value, **kwargs)``."""
    return None if value is None else check(name, value, **kwargs)


def require_integer(name: str, value: object, low: int | None = 0, high: int | None = None) -> int:
    """``value`` as an int in [low, high] (``low`` None: no floor), not a bool; for reading
    JSON (:func:`require_int` checks an argument already typed int)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParameterError(f"{name} must be an integer, got {value!r}")
    if low is not None:
        require_int(name, value, low, high)
    return value


def json_input(name: str, data: object) -> object:
    """The argument of every record's ``from_json``: a dict as it is, or its JSON text (str or
    bytes) parsed."""
    return parse_json_text(name, data) if isinstance(data, str | bytes) else data


def parse_json_text(name: str, text: str | bytes) -> object:
    """JSON text parsed (Infinity accepted, NaN refused), or InvalidParameterError."""
    try:
        return json.loads(text, parse_constant=_no_nan)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidParameterError(f"{name} must be JSON text: {exc}") from None


def _no_nan(constant: str) -> float:
    if constant == "NaN":
        raise ValueError("NaN is not a number a record may hold")
    return float(constant)


def _kind(value: object) -> str:
    return f"{type(value).__name__} {value!r}"[:120]
