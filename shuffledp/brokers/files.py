"""The files a broker is given from a key directory: accounts and ACL (``access/``) and its TLS
certificate (``tls/``); each checked present before a broker is configured with it."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["check_access_dir", "check_tls_dir"]


def check_access_dir(access_dir: str | os.PathLike[str]) -> Path:
    """The absolute ``access_dir``; AccessError unless it holds the broker's passwd and acl."""
    from shuffledp.security.access import AccessError

    root = Path(os.path.abspath(access_dir))
    for name in ("passwd", "acl"):
        if not (root / name).is_file():
            raise AccessError(
                f"{root / name}: broker {name} file must exist, it does not (made by `shuffledp "
                f"keys init` in KEYDIR/access)"
            )
    return root


def check_tls_dir(tls_dir: str | os.PathLike[str]) -> Path:
    """The absolute ``tls_dir``; TlsError unless it holds the server certificate and key."""
    from shuffledp.security.tls import SERVER_CERT_FILE, SERVER_KEY_FILE, TlsError

    root = Path(os.path.abspath(tls_dir))
    for name in (SERVER_CERT_FILE, SERVER_KEY_FILE):
        if not (root / name).is_file():
            raise TlsError(
                f"{root / name}: broker TLS file must exist, it does not (made by `shuffledp "
                f"keys init --tls` in KEYDIR/tls)"
            )
    return root
