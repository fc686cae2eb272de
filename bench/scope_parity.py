"""Scope parity: the engine's outputs and findings with its own scope analysis
(``codemod/scopes.py``) against libcst's ``ScopeProvider``, file by file.

    python bench/scope_parity.py [--before-root /path/to/other/checkout]

Over every Python file under ``fixtures/`` and ``examples/`` and the profile's
tree (``bench/codemod_profile.py``), each file is migrated in a fresh process
per side: once with libcst's scopes (``ACCEL_MIGRATE_LIBCST_SCOPES=1``), once with
the engine's own, and, with ``--before-root``, once more with another checkout's
code (the commit before the change). A file's record is the hash of its output,
its findings (line, column, code, status, message), its skip reason and its
suppressions (or the error it raised). Prints the files whose records differ
and each side's CPU time; exits 1 when any differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def files(tree: Path) -> list[Path]:
    sys.path.insert(0, str(ROOT / "bench"))
    from codemod_profile import make_tree

    found = sorted(
        {*ROOT.glob("fixtures/**/*.py"), *ROOT.glob("examples/**/*.py")}
        - set(ROOT.glob("fixtures/**/__pycache__/*.py"))
    )
    return found + make_tree(tree)


def record(path: Path) -> str:
    from accel_migrate.codemod.engine import migrate_source

    source = path.read_bytes()
    try:
        result = migrate_source(source, str(path))
    except Exception as exc:  # a file the engine refuses: its message is its record
        return f"error {type(exc).__name__}: {exc}"
    output = (
        result.output if isinstance(result.output, bytes) else result.output.encode()
    )
    findings = [
        (f.line, f.column, f.code, f.status, f.message) for f in result.findings
    ]
    text = json.dumps(
        [
            hashlib.sha256(output).hexdigest(),
            findings,
            result.skip_reason,
            list(result.suppressed),
            list(result.suppressed_rules),
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()


def dump(listing: Path, out: Path) -> None:
    paths = [Path(p) for p in json.loads(listing.read_text())]
    start = time.process_time()
    records = {str(p): record(p) for p in paths}
    out.write_text(json.dumps({"cpu": time.process_time() - start, "records": records}))


def side(name: str, root: Path, listing: Path, libcst_scopes: bool) -> dict:
    out = listing.with_name(f"{name}.json")
    env = dict(os.environ, PYTHONPATH=str(root))
    env.pop("ACCEL_MIGRATE_LIBCST_SCOPES", None)
    if libcst_scopes:
        env["ACCEL_MIGRATE_LIBCST_SCOPES"] = "1"
    subprocess.run(
        [sys.executable, __file__, "--dump", str(listing), str(out)],
        env=env,
        cwd=root,
        check=True,
    )
    return json.loads(out.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before-root", type=Path)
    parser.add_argument("--dump", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.dump:
        dump(*args.dump)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        listing = Path(tmp) / "files.json"
        paths = files(Path(tmp) / "tree")
        listing.write_text(json.dumps([str(p) for p in paths]))
        sides = {
            "libcst scopes": side("libcst", ROOT, listing, True),
            "own scopes": side("own", ROOT, listing, False),
        }
        if args.before_root:
            sides["before"] = side("before", args.before_root, listing, False)
    reference = sides["libcst scopes"]["records"]
    differ = 0
    for name, found in sides.items():
        print(f"{name}: {len(found['records'])} files, {found['cpu']:.1f} s CPU")
        for path, value in found["records"].items():
            if value != reference[path]:
                differ += 1
                print(f"  differs from libcst scopes: {path}")
    print("identical" if not differ else f"{differ} records differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
