"""Errors the user can fix: each names the file (or input), the field, and what to do.

They carry an ``error_code`` for the envelope and the exit code :mod:`memory_router.contract` gives it (2:
usage or configuration). Backend failures are not exceptions: they are ``error`` responses.
"""

from __future__ import annotations

from memory_router import contract

TYPE_CHECKING = False  # not typing's (nor pathlib at run time): the console script reads a query's text with these
if TYPE_CHECKING:
    from pathlib import Path


class RouterError(Exception):
    """Base class. ``str(err)`` is the full human message."""

    error_code = contract.ROUTER_ERROR

    @property
    def exit_code(self) -> int:
        return contract.exit_code(self.error_code)


class InvalidConfig(RouterError):
    """router-config.json cannot be used."""

    error_code = contract.CONFIG_INVALID

    def __init__(self, path: Path | str, where: str, problem: str, hint: str = "") -> None:
        self.path, self.where, self.problem, self.hint = str(path), where, problem, hint
        where_part = f" {where}:" if where else ""
        hint_part = f" {hint}" if hint else ""
        super().__init__(f"{path}:{where_part} {problem}.{hint_part}")


class BackendsFileMissing(RouterError):
    error_code = contract.BACKENDS_JSON_MISSING

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        super().__init__(
            f"{path} does not exist: it lists the installed memory backends. Create it with "
            "`memory-router init` (it checks which backends can run here), or pass --backends-json/"
            "--state-dir, or set MEMORY_ROUTER_STATE_DIR (or OPENCLAW_STATE_DIR, OpenClaw's root)."
        )


class InvalidBackendsFile(RouterError):
    error_code = contract.BACKENDS_JSON_INVALID

    def __init__(self, path: Path | str, where: str, problem: str) -> None:
        self.path, self.where, self.problem = str(path), where, problem
        where_part = f" {where}:" if where else ""
        super().__init__(
            f'{path}:{where_part} {problem}. Expected {{"backends": {{"qmd": {{"status": "ready"}}, ...}}}} '
            'or {"backends": ["qmd", "totalrecall"]}; re-run the installer or fix the file.'
        )


class InvalidQuery(RouterError):
    def __init__(self, code: str, message: str) -> None:
        self.error_code = code
        super().__init__(message)


class UnsafeStateDir(RouterError):
    """The state directory is another user's or writable by others
    (:func:`memory_router.config.statedir.check_state_dir`)."""

    error_code = contract.STATE_DIR_UNSAFE
