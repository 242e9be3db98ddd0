"""JSON output that a name holding bytes that are not UTF-8 cannot break, and JSON without orjson
or ``json`` where a process has loaded neither.

Linux file names (and argv, and the environment) are bytes; Python hands the bytes that are not
UTF-8 over as lone surrogates (``b"bad\\xffname.md"`` becomes ``"bad\\udcffname.md"``, PEP 383),
and orjson refuses to write a lone surrogate. Such a string may reach any output: a memory file's
path in a result, a ``--config`` path in an error message. :func:`dumps` therefore writes each
lone surrogate as readable text instead, the byte it stands for as ``\\xff`` (as Python's
``backslashreplace`` shows it) and any other one as ``\\udxxx``, so the answer is still the
whole envelope, with the name escaped, never a traceback. The common case pays nothing: only a
value orjson refused is walked.

The bytes are orjson's (the daemon, MCP and the plugin read them, and tests hold them), but a
cold ``query`` need not import it: importing orjson imports ``dataclasses``, ``inspect``,
``uuid``, ``platform``, ``json`` and ``datetime`` (20M instructions of a cold query's ~330M, half
the interpreter's own start; docs/benchmarks.md, *Cold start*). Where orjson is not loaded yet,
:func:`dumps` writes with ``json``'s C half (:func:`compact`, the thin client's encoder too) when
the value holds only what the two write alike (:func:`_alike`: JSON's own types, string keys, ints
orjson takes, floats outside ``0 < |x| < 1e-4``, where orjson writes ``0.0000999`` and ``1e-9``
for repr's ``9.99e-05`` and ``1e-09``), else with orjson; a test holds the two to the same bytes.
:func:`loads` is the reader to match, for JSON this process or orjson wrote.
"""

import _json  # the C half of `json`: `json` itself imports `re`
import sys

TYPE_CHECKING = False  # not typing's: the thin client imports this module
if TYPE_CHECKING:
    from typing import Any


def _not_json(value: object) -> object:
    raise TypeError(f"{type(value).__name__} is not JSON")


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


class _Decoding:
    """What the C scanner reads from a ``json.JSONDecoder``: strict strings, ``float``/``int``
    numbers (its fast paths), and no ``NaN``/``Infinity`` (orjson, on the daemon's side, writes none)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_no_constant)


# json.encoder's and json.decoder's own C fast paths, set up as json.dumps(value,
# ensure_ascii=False, separators=(",", ":"), allow_nan=False) and json.loads set them up.
_encode = _json.make_encoder(None, _not_json, _json.encode_basestring, None, ":", ",", False, False, False)
_scan = _json.make_scanner(_Decoding)  # type: ignore[arg-type]  # it reads the attributes above, as of a JSONDecoder


def compact(value: object) -> str:
    """``json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)``, without
    importing ``json``: ``ValueError`` for a float that is not finite, ``TypeError`` for a value
    that is not JSON."""
    return "".join(_encode(value, 0))


def loads(data: bytes) -> "Any":
    """One JSON value from UTF-8 ``data`` (surrounding whitespace allowed), as ``json.loads`` reads
    it minus ``NaN`` and ``Infinity``; ``ValueError`` if it is anything else."""
    text = data.decode("utf-8")  # UnicodeDecodeError is a ValueError
    start = len(text) - len(text.lstrip(" \t\n\r"))
    try:
        value, end = _scan(text, start)
    except Exception:  # noqa: BLE001 - not JSON: json itself says why, below
        pass
    else:
        if not text[end:].strip(" \t\n\r"):
            return value
    # Not JSON: json's own message. The C scanner needs json.decoder loaded to raise its error
    # (before 3.11 it raises SystemError instead), so json reads the text again here.
    import json

    return json.loads(text, parse_constant=_no_constant)


def escape_surrogates(text: str) -> str:
    """``text`` with every lone surrogate written out as text (see the module's docstring)."""
    return "".join(_escaped_char(ch) if "\ud800" <= ch <= "\udfff" else ch for ch in text)


def _escaped_char(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` if it can be written as UTF-8, else with its lone surrogates escaped."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return escape_surrogates(text)
    return text


def escaped(value: "Any") -> "Any":
    """A copy of JSON-ready ``value`` (dicts, lists, tuples, strings, scalars) with every string,
    keys included, passed through :func:`printable`."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {escaped(k): escaped(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [escaped(v) for v in value]
    return value


def loads_as_orjson(data: bytes) -> "Any":
    """What ``orjson.loads(data)`` returns, or raises (``orjson.JSONDecodeError``, a
    ``ValueError``): read by :func:`loads` while this process has not loaded orjson and the value
    is one the two read alike (:func:`read_alike`), else by orjson itself, so an error says what
    it always said. The config files a query reads each time (backends.json, router-config.json,
    its cache, the calibration) come through here."""
    if "orjson" not in sys.modules:
        value = read_alike(data)
        if value is not _DIFFERS:
            return value
    import orjson

    return orjson.loads(data)


_DIFFERS: "Any" = object()  # read_alike's "orjson would read this otherwise"


def read_alike(data: bytes) -> "Any":
    """``data`` read by :func:`loads`, or ``_DIFFERS`` where ``orjson.loads`` would read it to
    another value or refuse it."""
    try:
        value = loads(data)
    except (ValueError, RecursionError):
        return _DIFFERS  # orjson reads it again, for its own error
    return value if _read_alike(value, 0) else _DIFFERS


def _read_alike(value: object, depth: int) -> bool:
    """Whether orjson reads the JSON that :func:`loads` read as ``value`` to the same value: ints
    in its range (it reads others as floats), finite floats (it refuses a number that overflows
    to infinity), strings without a lone surrogate (it refuses ``"\\ud800"``)."""
    kind = type(value)
    if isinstance(value, str):
        return value.isascii() or _utf8(value)
    if kind is bool or value is None:
        return True
    if isinstance(value, int):
        return value in _INT_RANGE
    if isinstance(value, float):
        return abs(value) < _INFINITY
    if depth > _MAX_DEPTH:
        return False
    if isinstance(value, dict):
        return all(_read_alike(k, depth) and _read_alike(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return all(_read_alike(v, depth + 1) for v in value)
    return False


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def dumps(value: "Any", *, pretty: bool = False) -> bytes:
    """``orjson.dumps(value)`` (``pretty``: with ``OPT_INDENT_2``); a string it refuses (a lone
    surrogate) is escaped rather than failing the whole answer. Any other value that is not JSON
    still raises ``TypeError``. Written by ``json``'s C half while this process has not loaded
    orjson and the value is one the two write alike (:func:`written_alike`)."""
    if not pretty and "orjson" not in sys.modules:
        written = written_alike(value)
        if written is not None:
            return written
    import orjson  # here, not at the top: see the module's docstring

    option = orjson.OPT_INDENT_2 if pretty else 0
    try:
        return orjson.dumps(value, option=option)
    except TypeError:  # orjson.JSONEncodeError
        return orjson.dumps(escaped(value), option=option)


def written_alike(value: object) -> bytes | None:
    """The bytes ``orjson.dumps(value)`` writes, by :func:`compact`, or ``None`` where the two
    would write it otherwise (or orjson would refuse it, or :func:`dumps` escape a lone surrogate)."""
    if not _alike(value, 0):
        return None
    try:
        return compact(value).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: orjson refuses it and dumps escapes it
        return None


_INT_RANGE = range(-(1 << 63), 1 << 64)  # the ints orjson writes (it refuses the others) and reads as ints
_MAX_DEPTH = 200  # orjson refuses nesting past 255: deeper values are left to it


def _alike(value: object, depth: int) -> bool:
    """Whether :func:`compact` writes ``value`` as orjson does: exactly JSON's own types (no
    subclasses, which orjson may write otherwise), string keys, ints in orjson's range, floats
    both write alike (finite, 0 or at least 1e-4 in size)."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if isinstance(value, int) and kind is int:
        return value in _INT_RANGE
    if isinstance(value, float) and kind is float:
        return value == 0.0 or 1e-4 <= abs(value) < _INFINITY
    if depth > _MAX_DEPTH:
        return False
    if isinstance(value, dict) and kind is dict:
        return all(type(k) is str and _alike(v, depth + 1) for k, v in value.items())
    if isinstance(value, list | tuple) and (kind is list or kind is tuple):
        return all(_alike(v, depth + 1) for v in value)
    return False


_INFINITY = float("inf")
