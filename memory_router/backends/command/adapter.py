"""The generic command adapter: any executable that prints the stack's backend contract.

A backend of ``"type": "command"`` runs one program per query from an argv template, never
through a shell, and validates what it prints on stdout against the nine-field contract. This is
how the OpenClaw stack's existing backend skills plug in unchanged
(``wrapper.sh --adapter "<query>" --hint <mode>``) and how a user adds a backend the router does
not ship (OpenViking, Nowledge, a Vertex memory bank...)::

    "viking": {"type": "command",
               "argv": ["~/.openclaw/skills/openviking/wrapper.sh", "--adapter", "{query}", ["--hint", "{mode}"]],
               "env": {"OPENVIKING_URL": "http://127.0.0.1:1933"}, "max_output_bytes": 4194304}

**The template.** Each string in ``argv`` is one argument. Placeholders are substituted inside an
argument, and the result stays that single argument whatever it contains (quotes, ``$(...)``,
spaces, newlines): ``{query}`` (the router's normalised query), ``{mode}`` (the rule step's mode,
else ``default_mode``), ``{limit}``, ``{timeout_ms}``; ``{{`` and ``}}`` are literal braces. A
nested list is an optional group: it is left out whole when a placeholder in it has no value, so
``["--hint", "{mode}"]`` disappears for a step without a mode. Outside a group a missing value
becomes the empty string. Unknown placeholders are refused when the config is loaded.

**What counts as an answer.** Exit status 0 and stdout that is one JSON object with at least
``status`` (``success``/``empty``/``error``) and ``results`` (a list of objects with ``content``
and a 0..1 ``relevance``; ``source`` defaults to the backend name); the other contract fields are
optional on input. ``result_count`` is recomputed from ``results``; ``normalized_relevance``
defaults to the best result's relevance. Anything else is a ``BACKEND_ERROR`` that says exactly
what was wrong, with the last 300 characters of the program's stderr:

* not JSON, or JSON of the wrong shape (the first offending field is named);
* a non-zero exit (a printed ``error`` contract supplies the message), or death by a signal;
* more than ``max_output_bytes`` on stdout: the process group is killed at the limit, so the
  router never holds more than that in memory;
* a missing executable, a missing ``cwd``, or exit status 126/127 (the program could not run
  what it needed) are ``BACKEND_UNAVAILABLE``.

Timeouts belong to the router: it cancels the call and :mod:`.common.process` kills the program's whole
process group, so nothing the program started outlives the query.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

import orjson

from memory_router.backends import BackendContext
from memory_router.backends.base import (
    BACKEND_ERROR,
    BACKEND_UNAVAILABLE,
    BackendRequest,
    BackendResponse,
    Probe,
    Result,
    Stopwatch,
)
from memory_router.backends.common.process import ExecutableNotFound, OutputTooLarge, ProcessResult, run
from memory_router.backends.common.settings import EMPTY_MAPPING, AdapterSettings, Check, Limits
from memory_router.config.envvars import COMMAND

if TYPE_CHECKING:
    from memory_router.backends.command.wire import WireContract

ENV_VARS: frozenset[str] = COMMAND  # the environment variables it reads: memory_router.config.envvars

PLACEHOLDERS = ("query", "mode", "limit", "timeout_ms")
_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
STDERR_TAIL_CHARS = 300
DEFAULT_MAX_OUTPUT_BYTES = 8 * 1024 * 1024

ArgTemplate = str | tuple[str, ...]
MODES = None  # each command backend lists its own modes (Settings.modes)
demo_setup = None  # the demo has no command backend


def _check_argv(argv: tuple[ArgTemplate, ...]) -> tuple[ArgTemplate, ...]:
    if not isinstance(argv[0], str) or not argv[0].strip():
        raise ValueError("argv[0] must be the program to run (a path or a name on PATH), not a group")
    if any(m.group(1) for m in _TOKEN.finditer(argv[0])):
        raise ValueError("argv[0] (the program) cannot contain placeholders")
    for index, item in enumerate(argv):
        for arg in (item,) if isinstance(item, str) else item:
            for match in _TOKEN.finditer(arg):
                if match.group(1) is not None and match.group(1) not in PLACEHOLDERS:
                    raise ValueError(
                        f"argv[{index}] {arg!r}: unknown placeholder {{{match.group(1)}}} "
                        f"(known: {', '.join('{' + p + '}' for p in PLACEHOLDERS)}; write {{{{ for a literal brace)"
                    )
            if "\x00" in arg:
                raise ValueError(f"argv[{index}] contains a NUL byte")
        if not isinstance(item, str) and not item:
            raise ValueError(f"argv[{index}] is an empty group")
    return argv


class Settings(AdapterSettings):
    """``backends.<name>`` keys for ``"type": "command"`` in router-config.json."""

    argv: Annotated[tuple[ArgTemplate, ...], Limits(min_length=1), Check(_check_argv)]
    """The program and its arguments; see the module docstring for placeholders and groups."""
    cwd: str | None = None
    """Working directory (``~`` expanded; relative to the router's working directory)."""
    env: Mapping[str, str] = EMPTY_MAPPING
    """Added to (or overriding) the router's environment for the program."""
    stdin: Literal["none", "query", "json"] = "none"
    """What the program reads on stdin: nothing, the query text, or
    ``{"query", "mode", "limit", "timeout_ms"}`` as JSON (for programs that prefer not to parse argv)."""
    max_output_bytes: Annotated[int, Limits(ge=1024, le=1024 * 1024 * 1024)] = DEFAULT_MAX_OUTPUT_BYTES
    """stdout beyond this is refused and the program killed."""
    modes: tuple[str, ...] | None = None
    """The modes rules may name for this backend (``None``: any mode is passed through)."""
    default_mode: str | None = None
    """``{mode}`` for a rule step that names no mode."""


def create(name: str, settings: Settings, context: BackendContext) -> CommandBackend:
    return CommandBackend(name, settings, context)


# --------------------------------------------------------------------------- argv templates


def _fill(arg: str, values: Mapping[str, str | None], *, optional: bool) -> str | None:
    """Substitute one argument. A placeholder without a value makes the result ``None`` when
    ``optional`` (the argument belongs to a group), else it becomes the empty string."""
    missing = False

    def replace(match: re.Match[str]) -> str:
        nonlocal missing
        if match.group(0) == "{{":
            return "{"
        if match.group(0) == "}}":
            return "}"
        value = values.get(match.group(1))
        if value is None:
            missing = True
            return ""
        return value

    filled = _TOKEN.sub(replace, arg)
    return None if missing and optional else filled


def build_argv(template: tuple[ArgTemplate, ...], values: Mapping[str, str | None]) -> list[str]:
    """The argument list for one call. Every template string yields exactly one argument (or,
    inside an optional group whose placeholder has no value, none): no splitting, no shell."""
    argv: list[str] = []
    for item in template:
        if isinstance(item, str):
            argv.append(_fill(item, values, optional=False) or "")
        else:
            group = [_fill(arg, values, optional=True) for arg in item]
            if all(arg is not None for arg in group):
                argv.extend(group)  # type: ignore[arg-type]
    return argv


# --------------------------------------------------------------------------- the wire contract

# Its pydantic models live in ._command_wire, imported by parse_contract once a program has
# answered: importing this adapter (config loading, a query that does not call it) needs no pydantic.

MAX_REPORTED_MESSAGE = 1000
_CODE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")


def _reported_error(contract: WireContract) -> tuple[str, str]:
    """The program's own error code and message, kept within bounds: a code must look like one
    (``BACKEND_ERROR``, ``QUOTA_EXCEEDED``), a message is cut at 1000 characters."""
    message = contract.error_message or ""
    if len(message) > MAX_REPORTED_MESSAGE:
        message = message[:MAX_REPORTED_MESSAGE] + f"... ({len(message)} characters)"
    code = contract.error_code or BACKEND_ERROR
    if not _CODE.fullmatch(code):
        message += f" (its error_code was not a code: {code[:40]!r})"
        code = BACKEND_ERROR
    return code, message


class ContractError(Exception):
    """stdout is not a valid contract; the message says why, precisely."""


def _field_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def parse_contract(stdout: bytes) -> WireContract:
    """Parse and validate a program's stdout. Raises :class:`ContractError`."""
    if not stdout.strip():
        raise ContractError("printed nothing on stdout (expected one JSON object: the backend contract)")
    try:
        data = orjson.loads(stdout)
    except orjson.JSONDecodeError as exc:
        head = stdout[:60].decode("utf-8", "replace")
        raise ContractError(
            f"printed output that is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}; "
            f"output starts {head!r})"
        ) from None
    if not isinstance(data, dict):
        raise ContractError(f"printed a JSON {type(data).__name__}, not an object with the backend contract's fields")
    from pydantic import ValidationError

    from memory_router.backends.command.wire import WireContract

    try:
        return WireContract.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        first = errors[0]
        detail = first["msg"]
        if first["type"] != "missing" and "input" in first:
            detail += f" (got {orjson.dumps(first['input'], default=str).decode()[:80]})"
        more = f"; {len(errors) - 1} more problem(s)" if len(errors) > 1 else ""
        raise ContractError(
            f"printed JSON of the wrong shape: {_field_path(tuple(first['loc']))}: {detail}{more}"
        ) from None


# --------------------------------------------------------------------------- the backend


class CommandBackend:
    def __init__(self, name: str, settings: Settings, context: BackendContext) -> None:
        self.name = name
        self.settings = settings
        self.context = context
        program = settings.argv[0]
        assert isinstance(program, str)  # Settings' validator: argv[0] is a string, not a group
        self.program = os.path.expanduser(program)
        self.environ = {**context.environ, **settings.env}
        self.cwd = context.cwd / os.path.expanduser(settings.cwd) if settings.cwd else context.cwd

    def _resolve_program(self) -> str | None:
        """The executable's full path, or ``None`` if it cannot be run."""
        if os.sep in self.program:
            path = self.program if os.path.isabs(self.program) else str(self.cwd / self.program)
            return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
        return shutil.which(self.program, path=self.environ.get("PATH", os.defpath))

    def probe(self) -> Probe:
        resolved = self._resolve_program()
        if resolved is None:
            return Probe(False, f"{self.program}: not found or not executable")
        if not self.cwd.is_dir():
            return Probe(False, f"cwd {self.cwd} does not exist")
        return Probe(True, f"runs {resolved}", {"program": resolved})

    async def search(self, request: BackendRequest) -> BackendResponse:
        watch = Stopwatch()
        mode = request.mode if request.mode is not None else self.settings.default_mode
        values = {
            "query": request.query,
            "mode": mode,
            "limit": str(request.limit),
            "timeout_ms": str(int(request.timeout_s * 1000)),
        }
        argv = build_argv(self.settings.argv, values)
        argv[0] = self.program
        stdin: bytes | None = None
        if self.settings.stdin == "query":
            stdin = request.query.encode("utf-8")
        elif self.settings.stdin == "json":
            stdin = orjson.dumps({**values, "limit": request.limit, "timeout_ms": int(request.timeout_s * 1000)})

        def fail(code: str, message: str) -> BackendResponse:
            return BackendResponse.failure(self.name, request.query, code, message, duration_ms=watch.ms)

        if not self.cwd.is_dir():
            return fail(BACKEND_UNAVAILABLE, f"working directory {self.cwd} does not exist (backends.{self.name}.cwd)")
        try:
            result = await run(
                argv, cwd=self.cwd, env=self.environ, stdin=stdin, max_stdout=self.settings.max_output_bytes
            )
        except ExecutableNotFound as exc:
            return fail(
                BACKEND_UNAVAILABLE,
                f"cannot run {exc} (backends.{self.name}.argv[0] in router-config.json); "
                "install the backend or fix the path",
            )
        except OutputTooLarge as exc:
            return fail(
                BACKEND_ERROR,
                f"{self.program} printed more than {exc.limit} bytes on stdout "
                f"(backends.{self.name}.max_output_bytes); its process group was killed",
            )
        except (ValueError, OSError) as exc:  # e.g. an argument the OS refuses (too long)
            return fail(BACKEND_ERROR, f"cannot start {self.program}: {exc}")
        return self._interpret(request, result, watch.ms)

    def _interpret(self, request: BackendRequest, result: ProcessResult, duration_ms: int) -> BackendResponse:  # noqa: C901 - one branch per documented outcome of a command backend
        def fail(code: str, message: str) -> BackendResponse:
            tail = result.stderr_tail(STDERR_TAIL_CHARS)
            if tail:
                message += f"; stderr: {tail}"
            return BackendResponse.failure(self.name, request.query, code, message, duration_ms=duration_ms)

        contract: WireContract | None = None
        problem: str | None = None
        try:
            contract = parse_contract(result.stdout)
        except ContractError as exc:
            problem = str(exc)

        if result.returncode != 0:
            if result.returncode < 0:
                try:
                    signame = signal.Signals(-result.returncode).name
                except ValueError:
                    signame = f"signal {-result.returncode}"
                how = f"was killed by {signame}"
            else:
                how = f"exited with code {result.returncode}"
            if contract is not None and contract.status == "error" and contract.error_message:
                code, message = _reported_error(contract)
                return fail(code, f"{message} ({self.program} {how})")
            unavailable = result.returncode in (126, 127)
            return fail(
                BACKEND_UNAVAILABLE if unavailable else BACKEND_ERROR,
                f"{self.program} {how}"
                + (" (a program it runs is missing or not executable)" if unavailable else "")
                + ("" if result.stdout.strip() else " and printed nothing"),
            )
        if contract is None:
            return fail(BACKEND_ERROR, f"{self.program} {problem}")
        if contract.status == "error":
            code, message = _reported_error(contract)
            return fail(code, message or f"{self.program} reported status error without a message")
        results = tuple(Result(**(r.model_dump() | {"source": r.source or self.name})) for r in contract.results)
        response = BackendResponse.from_results(self.name, request.query, results, duration_ms=duration_ms)
        if results and contract.normalized_relevance is not None:
            # The program's own normalized_relevance wins over "best result", as in the stack.
            response = response.replace(normalized_relevance=contract.normalized_relevance)
        return response
