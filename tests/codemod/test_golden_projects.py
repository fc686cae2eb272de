"""Golden projects: fixtures/projects/<case>/in/ (a tree of files migrated as one
batch, with one project view) -> out/ (the expected tree) + findings.txt.

Black-style checks for every file: the output parses, a second run over the
output tree changes nothing, and a file that does not change comes back byte for
byte. Regenerate with ``pytest --update-golden`` and read the diff.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from accel_migrate.cli.project import Project
from accel_migrate.codemod import MigrateOptions, MigrationResult, migrate_source
from accel_migrate.codemod.project_view import ProjectView
from tests.conftest import FIXTURES

PROJECTS = sorted(p for p in (FIXTURES / "projects").glob("*/in") if p.is_dir())


def migrate_tree(root: Path) -> dict[Path, MigrationResult]:
    """Every file of ``root`` migrated as one batch (one view of the project), with
    the batch's decisions across files (a helper module migrated at its call sites
    is left unchanged: AM102; an importer of a
    training file left whole is left whole: AM103; a helper module that makes its
    own writes and prints main-process ones keeps its migration, and left whole
    leaves its importers whole), as ``accel-migrate ROOT`` makes them.
    """
    files = sorted(root.rglob("*.py"))
    view = ProjectView([str(f) for f in files])
    facts = [view.facts_for(str(f)) for f in files]
    results = [
        migrate_source(f.read_bytes(), str(f), MigrateOptions(project=fact))
        for f, fact in zip(files, facts, strict=True)
    ]
    project = Project([f.relative_to(root).as_posix() for f in files], files)
    libraries = project.libraries()
    migrated = project.migrated_libraries(libraries, facts.__getitem__)
    kept = project.keep_whole_setups(
        project.keep_libraries(results, libraries, migrated),
        project.training_imports(migrated),
        migrated,
        project.loader_libraries(migrated, facts.__getitem__),
    )
    return {f.relative_to(root): r for f, r in zip(files, kept, strict=True)}


def _findings_text(results: dict[Path, MigrationResult]) -> str:
    lines = []
    for rel, result in results.items():
        lines.append(f"== {rel.as_posix()}")
        lines += [
            f"{f.line}:{f.column}: {f.code} [{f.status}] {f.message}"
            for f in result.findings
        ]
        if result.skip_reason:
            lines.append(f"skipped: {result.skip_reason}")
    return "".join(line + "\n" for line in lines)


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: p.parent.name)
def test_golden_project(project: Path, update_golden: bool, tmp_path: Path) -> None:
    results = migrate_tree(project)
    expected_root = project.parent / "out"
    findings_path = project.parent / "findings.txt"
    if update_golden:
        shutil.rmtree(expected_root, ignore_errors=True)
        for rel, result in results.items():
            (expected_root / rel).parent.mkdir(parents=True, exist_ok=True)
            (expected_root / rel).write_bytes(result.output)  # type: ignore[arg-type]
        findings_path.write_text(_findings_text(results))
    expected = sorted(p.relative_to(expected_root) for p in expected_root.rglob("*.py"))
    assert expected == sorted(results), "out/ tree differs: run --update-golden"
    for rel, result in results.items():
        assert result.output == (expected_root / rel).read_bytes(), rel
        ast.parse(result.output)
        if not result.changed:
            assert (
                result.output is result.source
                or result.output == (project / rel).read_bytes()
            )
    assert _findings_text(results) == findings_path.read_text()
    # A second run over the migrated tree (its own view) changes nothing.
    shutil.copytree(expected_root, tmp_path / "tree")
    for rel, again in migrate_tree(tmp_path / "tree").items():
        assert not again.changed, f"{rel}: a second run changes it again"
