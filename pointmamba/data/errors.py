"""The one error type for bad scan, label and split files."""
from __future__ import annotations

from os import PathLike


class ScanFormatError(ValueError):
    """A scan, label or split file that cannot be used as it is.

    The message always starts with the file and the field (``"<file>: <field>: <what is wrong>"``);
    both are kept as attributes so callers can report or collect them.
    """

    def __init__(self, path: str | PathLike | None, field: str, message: str) -> None:
        self.path = str(path) if path is not None else "<memory>"
        self.field = field
        self.reason = message
        super().__init__(f"{self.path}: {field}: {message}")


class ScanWarning(UserWarning):
    """A scan that can be used but looks damaged (e.g. possibly truncated); the message names the file."""
