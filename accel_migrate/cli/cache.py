"""Results of earlier runs, as black and ruff keep them: a re-run over unchanged
files costs about as much as reading them.

One entry per (file content, settings): the key is a SHA-256 of the bytes read, of
the tool's version and of its own code (a changed rule is a new tool), and of
every field of MigrateOptions (the selected and ignored rules, the alias, the
pre-screen switch), and of the pyproject.toml files that black reads its settings
from. The path is not in the key: beyond those settings, a migration does not
depend on where the file lies, and the cached result is handed back under the
path asked about.

The folder is ``$ACCEL_MIGRATE_CACHE_DIR``, else ``$XDG_CACHE_HOME/accel-migrate``,
else ``~/.cache/accel-migrate``; ``--no-cache`` neither reads nor writes it.

An entry is written to a temporary file in its folder and renamed over its name
(``os.replace``): a reader, another worker of ``-j`` or a run killed with SIGKILL
sees the whole entry or none. Each entry starts with a checksum of the rest; an
entry that does not match it (truncated, corrupt, written by another version of
the format) is ignored and rewritten, never trusted. Any error of the cache
itself (a read-only folder, a full disk) only costs the speed-up.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .. import __version__
from ..codemod import MigrateOptions, MigrationResult
from ..codemod.black_config import black_settings_key
from ..codemod.findings import Failure, Finding
from ..codemod.test_files import test_module_name

ENVIRONMENT = "ACCEL_MIGRATE_CACHE_DIR"
#: Bumped when the entry format changes (old entries are then left unread).
FORMAT = "1"
_MAGIC = b"accel-migrate-cache " + FORMAT.encode() + b" "

Outcome = MigrationResult | Failure


def default_folder() -> Path:
    explicit = os.environ.get(ENVIRONMENT)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.path.expanduser("~"), ".cache"
    )
    return Path(base) / "accel-migrate"


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A hash of the migration code itself (the ``codemod`` package): a rule edited
    in a checkout, without a new version number, must not read old results."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent.parent / "codemod"
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"unreadable")
    return digest.hexdigest()


@dataclass(frozen=True)
class ResultCache:
    folder: Path
    #: A hash of everything but the file's content that decides a result.
    settings: str
    #: The options ``settings`` is the hash of.
    options: MigrateOptions | None = None

    def retarget(self, options: MigrateOptions) -> ResultCache:
        """The same cache, for ``options`` (a file with per-file-ignores)."""
        if options == self.options:
            return self
        return ResultCache.for_options(options, self.folder)

    @classmethod
    def for_options(
        cls, options: MigrateOptions, folder: Path | None = None
    ) -> ResultCache:
        # Every field of the options, so that one added later is in the key too.
        described = json.dumps(
            {
                "version": __version__,
                "code": code_fingerprint(),
                **{
                    f.name: _plain(getattr(options, f.name))
                    for f in dataclasses.fields(options)
                },
            },
            sort_keys=True,
        )
        settings = hashlib.sha256(described.encode()).hexdigest()
        return cls(folder or default_folder(), settings, options)

    def _entry(self, path: str, source: bytes, project: str = "") -> Path:
        # ``project``: the digest of the facts of the file's local imports (a
        # changed utils.py is a new result for the train.py that imports it).
        # A test module's name decides too: test_train.py that defines tests is
        # skipped, the same bytes as train.py are a training script. Otherwise
        # the path is not in the key (a moved or copied file hits).
        salt = (
            self.settings
            + ("\0test-name" if test_module_name(path) else "")
            + (f"\0{project}" if project else "")
            # The project's black settings shape the output (formatting.py).
            + f"\0black\0{black_settings_key(path)}"
        )
        key = hashlib.sha256(salt.encode() + b"\0" + source).hexdigest()
        return self.folder / FORMAT / key[:2] / key

    def get(self, path: str, source: bytes, project: str = "") -> Outcome | None:
        """The cached outcome of migrating ``source``, named ``path``, with the
        project facts of digest ``project``; None when there is none, or it cannot
        be trusted."""
        try:
            data = self._entry(path, source, project).read_bytes()
        except OSError:
            return None
        try:
            return _decode(data, path, source)
        except Exception:  # corrupt, truncated, foreign: never trusted
            return None

    def put(
        self, path: str, source: bytes, outcome: Outcome, project: str = ""
    ) -> None:
        data = _encode(source, outcome)
        if data is None:
            return
        entry = self._entry(path, source, project)
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(
                dir=entry.parent, prefix=".tmp-", suffix=".part"
            )
            try:
                with os.fdopen(handle, "wb") as out:
                    out.write(data)
                os.replace(temporary, entry)
            except BaseException:
                os.unlink(temporary)
                raise
        except OSError:
            pass


def _plain(value: object) -> object:
    if isinstance(value, (frozenset, set)):
        return sorted(repr(v) for v in value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return repr(value)


def _encode(source: bytes, outcome: Outcome) -> bytes | None:
    if isinstance(outcome, Failure):
        # Only what follows from the bytes alone: a file that does not parse, not
        # a read error or an internal error (a bug, or out of memory, this time).
        if not outcome.message.startswith("cannot parse"):
            return None
        payload: dict[str, object] = {
            "failure": [outcome.line, outcome.column, outcome.message]
        }
    else:
        if not isinstance(outcome.source, bytes) or outcome.source != source:
            return None
        changed = outcome.changed
        assert isinstance(outcome.output, bytes)
        payload = {
            "output": base64.b64encode(outcome.output).decode() if changed else None,
            "findings": [
                [f.line, f.column, f.code, f.status, f.message]
                for f in outcome.findings
            ],
            "skip_reason": outcome.skip_reason,
            "suppressed": list(outcome.suppressed),
            "suppressed_rules": list(outcome.suppressed_rules),
        }
    body = json.dumps(payload, separators=(",", ":")).encode()
    # The source's hash is stored too: an entry is only ever read for its own bytes.
    body = hashlib.sha256(source).hexdigest().encode() + b"\n" + body
    return _MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def _decode(data: bytes, path: str, source: bytes) -> Outcome | None:
    if not data.startswith(_MAGIC):
        return None
    checksum, _, body = data[len(_MAGIC) :].partition(b"\n")
    if hashlib.sha256(body).hexdigest().encode() != checksum:
        return None
    source_hash, _, raw = body.partition(b"\n")
    if hashlib.sha256(source).hexdigest().encode() != source_hash:
        return None
    payload = json.loads(raw)
    if "failure" in payload:
        line, column, message = payload["failure"]
        return Failure(path, int(line), int(column), str(message))
    output = payload["output"]
    return MigrationResult(
        path,
        source,
        source if output is None else base64.b64decode(output, validate=True),
        tuple(
            Finding(int(line), int(column), str(code), status, str(message))
            for line, column, code, status, message in payload["findings"]
        ),
        skip_reason=payload["skip_reason"],
        suppressed=tuple(int(n) for n in payload["suppressed"]),
        suppressed_rules=tuple(str(r) for r in payload.get("suppressed_rules", ())),
    )
