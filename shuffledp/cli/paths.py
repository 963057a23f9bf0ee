"""Checks of the files and folders named on the command line, made before any work starts.

An output that cannot be written is refused at once (one line, exit status 2), never discovered
with a traceback after a whole round; an input file that is missing or unreadable likewise.
Each message names the flag.
"""

from __future__ import annotations

import os
from pathlib import Path

from shuffledp.errors import InvalidParameterError

__all__ = ["check_input_file", "check_output_dir", "check_output_file"]


def _nearest_existing(path: Path) -> Path:
    """``path`` or its closest ancestor that exists (what a mkdir -p would start from)."""
    current = path
    while not current.exists() and current != current.parent:
        current = current.parent
    return current


def _check_creatable(flag: str, path: Path) -> None:
    """``path`` does not exist: its nearest existing ancestor must be a writable folder."""
    base = _nearest_existing(path.parent)
    if not base.is_dir():
        raise InvalidParameterError(f"{flag} {path}: {base} is not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise InvalidParameterError(f"{flag} {path}: cannot create it, {base} is not writable")


def check_output_file(flag: str, path: Path, *, overwrite: bool = True) -> Path:
    """``path`` can be written as a file: an existing writable file (refused unless
    ``overwrite``), or a new file whose missing parent folders can be created."""
    path = Path(os.path.abspath(path))
    if path.is_dir():
        raise InvalidParameterError(f"{flag} {path}: is a folder, a file name is needed")
    if path.exists():
        if not overwrite:
            raise InvalidParameterError(f"{flag} {path}: already exists (--overwrite replaces it)")
        if not os.access(path, os.W_OK):
            raise InvalidParameterError(f"{flag} {path}: the file is not writable")
        return path
    _check_creatable(flag, path)
    return path


def check_output_dir(flag: str, path: Path) -> Path:
    """``path`` can hold output files: a writable folder, or one that can be created."""
    path = Path(os.path.abspath(path))
    if path.exists():
        if not path.is_dir():
            raise InvalidParameterError(f"{flag} {path}: is a file, a folder is needed")
        if not os.access(path, os.W_OK | os.X_OK):
            raise InvalidParameterError(f"{flag} {path}: the folder is not writable")
        return path
    _check_creatable(flag, path)
    return path


def check_input_file(flag: str, path: Path) -> Path:
    """``path`` is an existing readable file."""
    if not path.exists():
        raise InvalidParameterError(f"{flag} {path}: no such file")
    if path.is_dir():
        raise InvalidParameterError(f"{flag} {path}: is a folder, a file is needed")
    if not os.access(path, os.R_OK):
        raise InvalidParameterError(f"{flag} {path}: the file is not readable")
    return path
