"""AM033's reason where a printed value differs between processes but is not
this process's share of a split batch: the batches of a generator that is not
a loader accel-migrate splits (eric-mitchell/direct-preference-optimization's
``get_batch_iterator``, dpo_reference_t11a), or a random draw each process
makes. Before, both were called "computed from this process's share of the
batch", with advice to combine the shares."""

from __future__ import annotations

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView
from tests.conftest import FIXTURES

DPO = FIXTURES / "soundness" / "dpo_reference_t11a_project"


def test_a_generator_of_whole_batches_is_not_called_a_share() -> None:
    files = sorted(DPO.rglob("*.py"))
    view = ProjectView([str(f) for f in files])
    trainers = DPO / "trainers.py"
    result = migrate_source(
        trainers.read_bytes(),
        str(trainers),
        MigrateOptions(project=view.facts_for(str(trainers))),
    )
    found = [f for f in result.findings if f.code == "AM033"]
    assert found
    for finding in found:
        assert "share of the batch" not in finding.message
        assert "computed from the batches of `self.train_iterator`" in finding.message
        assert "does not split across processes" in finding.message


def test_a_random_draw_is_not_called_a_share() -> None:
    source = (FIXTURES / "printed_local_values" / "random_draw.in.py").read_text()
    result = migrate_source(source, "train.py")
    (finding,) = [f for f in result.findings if f.code == "AM033"]
    assert "`temperature`" in finding.message
    assert "random draw (`random.uniform(0.5, 1.5)`)" in finding.message
    assert "share of the batch" not in finding.message
