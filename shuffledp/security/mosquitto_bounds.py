"""Mosquitto's per-role bounds: the plugin ``mosquitto_bounds.c``, compiled at first use.

Why a plugin: Mosquitto 2.0 offers ``max_packet_size`` and ``retain_available`` only globally
(one value for every client), and its dynamic-security plugin has no rule on the retain flag or
the size; the embedded broker enforces every bound of :mod:`shuffledp.security.broker_limits`
per role in Python. The C plugin (``mosquitto_bounds.c``, a Mosquitto v5 plugin shipped as package data) refuses a
client account's retained PUBLISH or will and any PUBLISH whose payload exceeds
:func:`~shuffledp.security.broker_limits.client_payload_bytes`; stage accounts are left alone, and
everything it does not refuse goes on to the ``acl_file`` (it never grants: see the C file).

How it is built: at first use, when a configuration with accounts is written
(:func:`bounds_settings`, called by ``write_mosquitto_config(access_dir=...)``, hence
:class:`~shuffledp.brokers.mosquitto.MosquittoBroker`, and by ``shuffledp keys init``), with the
system C compiler (``$CC``, else ``cc``, else ``gcc``) against Mosquitto's development headers
(``mosquitto_plugin.h``, ``mosquitto_broker.h``, ``mosquitto.h``: Debian's ``mosquitto-dev`` and
``libmosquitto-dev``), into ``<cache>/mosquitto-plugin/<hash>/mosquitto_bounds.so``, where
``<cache>`` is the data cache (``$SHUFFLEDP_CACHE_DIR``, ``$XDG_CACHE_HOME/shuffledp`` or
``~/.cache/shuffledp``) and ``<hash>`` the SHA-256 of the source, the three headers and the
compiler's path: a new source or a new Mosquitto gets a new build, an unchanged one is reused.
``keys init`` copies the library into the access directory (``mosquitto_bounds.so``, 0644), beside
the passwd and acl files the broker's user must read already.

Without a compiler, without the headers, or if the compilation fails, nothing is silent: the
configuration then has today's global bounds only and says so in a comment naming the reason,
:func:`bounds_settings` logs a warning, and :class:`PluginBuild` carries the reason for the
broker's description (``simulate``'s report names it).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from shuffledp.security.broker_limits import STAGE_PACKET_BYTES

__all__ = [
    "HEADERS",
    "SOURCE",
    "STAGE_ACCOUNTS",
    "PluginBuild",
    "bounds_settings",
    "build_bounds_plugin",
]

SOURCE = Path(__file__).with_name("mosquitto_bounds.c")
HEADERS = ("mosquitto_plugin.h", "mosquitto_broker.h", "mosquitto.h")
INCLUDE_DIRS = ("/usr/include", "/usr/local/include")
LIBRARY = "mosquitto_bounds.so"
STAGE_ACCOUNTS = r"^(hop-(0|[1-9][0-9]*)(-p(0|[1-9][0-9]*))?|analyzer|monitor)$"
"""The stage accounts (:mod:`shuffledp.security.access`), which the plugin leaves alone; every
other username (``clients-<j>``, an unknown one, none) is bounded."""
COMPILE_SECONDS = 60.0
ENFORCED = "client retain refused and client payload bounded per role (bounds plugin)"

_LOG = logging.getLogger("shuffledp.brokers")


@dataclass(frozen=True, slots=True)
class PluginBuild:
    """The compiled plugin (``path``), or None and why not (``reason``)."""

    path: Path | None
    reason: str = ""

    @property
    def description(self) -> str:
        """One line for a broker's description: what is enforced, or what is not and why."""
        if self.path is not None:
            return ENFORCED
        return (
            f"client retain and per-role packet size NOT enforced on this Mosquitto "
            f"({self.reason}): a client account may publish up to {STAGE_PACKET_BYTES} bytes "
            f"and retain messages"
        )


def _compiler() -> str | None:
    for name in (os.environ.get("CC", ""), "cc", "gcc"):
        if name and (found := shutil.which(name)):
            return found
    return None


def _headers(include_dirs: tuple[str, ...]) -> list[Path] | None:
    """The Mosquitto headers, all from one include directory; None if none has them all."""
    for directory in include_dirs:
        paths = [Path(directory) / name for name in HEADERS]
        if all(path.is_file() for path in paths):
            return paths
    return None


def _cache_root() -> Path:
    """``mosquitto-plugin/`` in the data cache: ``$SHUFFLEDP_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/shuffledp`` (an absolute path only), else ``~/.cache/shuffledp`` (the rule
    of shuffledp.simulations.data.fetch.cache_dir, which this layer may not import)."""
    if os.environ.get("SHUFFLEDP_CACHE_DIR"):
        root = Path(os.environ["SHUFFLEDP_CACHE_DIR"]).expanduser()
    elif (xdg := os.environ.get("XDG_CACHE_HOME", "")) and Path(xdg).is_absolute():
        root = Path(xdg) / "shuffledp"
    else:
        root = Path.home() / ".cache" / "shuffledp"
    return root / "mosquitto-plugin"


def _digest(compiler: str, headers: list[Path]) -> str:
    digest = hashlib.sha256(compiler.encode() + b"\0" + SOURCE.read_bytes())
    for header in headers:
        digest.update(b"\0" + header.read_bytes())
    return digest.hexdigest()[:24]


def build_bounds_plugin(
    *, include_dirs: tuple[str, ...] = INCLUDE_DIRS, cache: Path | None = None
) -> PluginBuild:
    """The plugin library, compiled now unless a build of the same source, headers and
    compiler is cached (module docstring); never raises for a missing compiler, missing
    headers or a failed compilation: the :class:`PluginBuild` says why instead."""
    compiler = _compiler()
    if compiler is None:
        return PluginBuild(None, "no C compiler: cc or gcc not found (apt-get install gcc)")
    headers = _headers(include_dirs)
    if headers is None:
        return PluginBuild(
            None,
            f"no Mosquitto plugin headers ({', '.join(HEADERS)}) in {', '.join(include_dirs)} "
            f"(apt-get install mosquitto-dev libmosquitto-dev)",
        )
    target = (cache or _cache_root()) / _digest(compiler, headers) / LIBRARY
    if target.is_file():
        return PluginBuild(target)
    return _compile(compiler, headers[0].parent, target)


def _compile(compiler: str, include_dir: Path, target: Path) -> PluginBuild:
    """Compile SOURCE into ``target`` (through a temporary file renamed into place, so that a
    concurrent build or an interrupted one never leaves a partial library)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        descriptor, partial = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=target.parent)
        os.close(descriptor)
    except OSError as exc:
        return PluginBuild(None, f"cannot write the plugin's cache folder {target.parent}: {exc}")
    command = [compiler, "-shared", "-fPIC", "-O2", "-Wall", f"-I{include_dir}"]
    command += ["-o", partial, str(SOURCE)]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=COMPILE_SECONDS)
        if result.returncode != 0:
            lines = (result.stderr or result.stdout).strip().splitlines()
            return PluginBuild(
                None,
                f"{compiler} failed to compile {SOURCE.name} (exit {result.returncode}): "
                f"{lines[0] if lines else 'no output'}",
            )
        os.chmod(partial, 0o755)
        os.replace(partial, target)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return PluginBuild(None, f"{compiler} could not compile {SOURCE.name}: {exc}")
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return PluginBuild(target)


def bounds_settings(client_payload: int, build: PluginBuild | None = None) -> str:
    """The Mosquitto lines that load the plugin with ``client_payload`` as the client accounts'
    bound (``build``: :func:`build_bounds_plugin` unless given); without a plugin, comment lines
    saying what is not enforced and why (and a logged warning). Only for a configuration with
    an ``acl_file``: the plugin defers to it, and without one every deferred check is denied."""
    build = build_bounds_plugin() if build is None else build
    if build.path is None:
        _LOG.warning("Mosquitto configuration: %s", build.description)
        return (
            "# Per-role bounds (shuffledp/security/mosquitto_bounds.c) NOT loaded: client retain\n"
            "# and per-role packet size are not enforced on this Mosquitto, because\n"
            f"# {build.reason}.\n"
            f"# A client account may publish up to {STAGE_PACKET_BYTES} bytes and retain messages.\n"
        )
    return (
        "# Per-role bounds (shuffledp/security/mosquitto_bounds.c, a Mosquitto 2.0 plugin: these\n"
        "# options are global in Mosquitto itself): a client account's retained PUBLISH or will\n"
        "# and any PUBLISH of a payload over its report size are refused; stage accounts are left\n"
        "# alone; what it does not refuse goes on to the acl_file (it never grants access).\n"
        f"plugin {build.path}\n"
        f"plugin_opt_client_payload_bytes {client_payload}\n"
        f"plugin_opt_stage_accounts {STAGE_ACCOUNTS}\n"
    )
