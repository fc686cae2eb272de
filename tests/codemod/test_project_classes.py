"""Cross-file callers of a CLASS (issue 12): ``Trainer(model, loader, opt)`` and
``trainer.evaluate(loader)`` in ``main.py``, with ``class Trainer`` in
``trainer.py`` (``project_instances``, ``project_callers``), the step callbacks
a trainer runs (``step_callbacks``), and the batch's all-or-nothing decision in
both directions (AM103)."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView, read_project
from accel_migrate.codemod.step_callbacks import step_callbacks
from tests.codemod.test_golden_projects import migrate_tree
from tests.conftest import FIXTURES

PROJECTS = FIXTURES / "projects"


def _copy(case: str, tmp_path: Path) -> Path:
    root = tmp_path / case
    shutil.copytree(PROJECTS / case / "in", root)
    return root


def _view(root: Path) -> ProjectView:
    return ProjectView([str(p) for p in sorted(root.rglob("*.py"))])


def test_constructor_and_method_calls_are_bound_to_their_parameters(
    tmp_path: Path,
) -> None:
    root = _copy("trainer_class", tmp_path)
    facts = _view(root).facts_for(str(root / "trainer.py"))
    [init] = facts.callers_of("Trainer.__init__")
    assert init.where == "main.py:23"
    assert dict(init.arguments) == {
        "model": "model",
        "train_loader": "loader",
        "optimizer": "optimizer",
        "save_every": "",
        "path": "",
    }
    [evaluate] = facts.callers_of("Trainer.evaluate")
    assert dict(evaluate.arguments) == {"loader": "loader"}
    [train] = facts.callers_of("Trainer.train")
    assert dict(train.arguments) == {"epochs": ""}  # `self` is not bound
    assert not facts.callers_of("Trainer._run_batch")  # called on self only


def test_the_model_class_a_caller_hands_is_recorded(tmp_path: Path) -> None:
    root = _copy("mingpt", tmp_path)
    facts = _view(root).facts_for(str(root / "mingpt" / "trainer.py"))
    sites = facts.callers_of("Trainer.__init__")
    assert {s.file for s in sites} == {
        "projects/adder_trainer/adder.py",
        "projects/chargpt/chargpt.py",  # its model is built in `if __name__`
    }
    for site in sites:
        assert site.kind("model") == "model"
        gpt = site.model_class("model")
        assert gpt is not None and (gpt.name, gpt.file) == ("GPT", "mingpt/model.py")
        assert gpt.optimizer_methods == ("configure_optimizers",)


def test_an_instance_handed_in_is_not_followed(tmp_path: Path) -> None:
    root = _copy("trainer_class", tmp_path)
    (root / "loop.py").write_text(
        "def again(trainer, loader):\n    return trainer.evaluate(loader)\n"
    )
    facts = _view(root).facts_for(str(root / "trainer.py"))
    # only main.py's call: `trainer` in loop.py is a parameter, of any class
    assert [s.file for s in facts.callers_of("Trainer.evaluate")] == ["main.py"]


def test_a_method_the_class_file_also_calls_on_an_instance_is_not_given(
    tmp_path: Path,
) -> None:
    root = _copy("trainer_class", tmp_path)
    trainer = root / "trainer.py"
    trainer.write_text(
        trainer.read_text()
        + "\n\ndef smoke(t):\n    return t.evaluate([(None, None)])\n"
    )
    result = migrate_source(
        trainer.read_bytes(),
        str(trainer),
        MigrateOptions(project=_view(root).facts_for(str(trainer))),
    )
    # `loader` of evaluate is not known a loader: its sums are not reduced
    assert "accel.reduce(correct)" not in result.output.decode()  # type: ignore[union-attr]


MINGPT_TRAINER = PROJECTS / "mingpt" / "in" / "mingpt" / "trainer.py"


def _trainer_class(source: str) -> ast.ClassDef:
    return next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef))


def test_mingpt_runs_its_callbacks_after_each_backward() -> None:
    cls = _trainer_class(MINGPT_TRAINER.read_text())
    assert step_callbacks(cls) == (("add_callback", "callback", 1),)


def test_callbacks_run_under_a_branch_or_before_the_backward_are_not_step_callbacks() -> (
    None
):
    source = MINGPT_TRAINER.read_text()
    branch = source.replace(
        '            self.trigger_callbacks("on_batch_end")\n',
        "            if self.iter_num % 2:\n"
        '                self.trigger_callbacks("on_batch_end")\n',
    )
    assert branch != source
    assert step_callbacks(_trainer_class(branch)) == ()
    before = source.replace(
        '            self.trigger_callbacks("on_batch_end")\n', ""
    ).replace(
        "            model.zero_grad(set_to_none=True)\n",
        "            model.zero_grad(set_to_none=True)\n"
        '            self.trigger_callbacks("on_batch_end")\n',
    )
    assert step_callbacks(_trainer_class(before)) == ()
    twice = source.replace(
        "        self.iter_num = 0\n        self.iter_time = time.time()\n",
        '        self.iter_num = 0\n        self.trigger_callbacks("on_start")\n'
        "        self.iter_time = time.time()\n",
    )
    assert twice != source
    assert step_callbacks(_trainer_class(twice)) == ()


def test_a_loss_read_outside_a_step_callback_is_reported_with_its_file(
    tmp_path: Path,
) -> None:
    root = _copy("mingpt", tmp_path)
    adder = root / "projects" / "adder_trainer" / "adder.py"
    adder.write_text(
        adder.read_text().replace(
            "    trainer.run()\n",
            '    trainer.run()\n    print(f"last {trainer.loss.item():.6f}")\n',
        )
    )
    results = migrate_tree(root)
    result = results[Path("projects/adder_trainer/adder.py")]
    [review] = [f for f in result.findings if f.status == "needs-review"]
    assert review.code == "AM008"
    assert "mingpt/trainer.py" in review.message
    assert "line 70" in review.message
    # the callback's read is still made global
    assert "accel.global_loss(trainer.loss)" in result.output.decode()  # type: ignore[union-attr]


def test_with_one_file_argument_the_caller_is_left_whole(tmp_path: Path) -> None:
    root = _copy("trainer_class", tmp_path)
    main = root / "main.py"
    assert not read_project(str(main)).callers
    result = migrate_source(main.read_bytes(), str(main))
    assert not result.changed
    [block] = result.needs_review
    assert block.code == "AM004" and "trainer.py" in block.message


def test_a_caller_left_whole_leaves_the_trainer_class_whole(tmp_path: Path) -> None:
    """Before: trainer.py was migrated (backward, prints, reduced sums) while
    main.py, which builds its model and loaders, was left unchanged."""
    root = _copy("trainer_class", tmp_path)
    main = root / "main.py"
    main.write_text(
        main.read_text().replace(
            "    model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 2))\n",
            '    model, _ = torch.load("model.pt")\n',
        )
    )
    results = migrate_tree(root)
    assert not results[Path("main.py")].changed
    assert results[Path("main.py")].needs_review
    trainer = results[Path("trainer.py")]
    assert not trainer.changed
    [note] = trainer.findings
    assert note.code == "AM103" and note.status == "needs-review"
    assert "is imported by main.py" in note.message


def test_set_callback_beside_add_callback_registers_step_callbacks_too() -> None:
    """minGPT's Trainer has both: ``set_callback`` replaces the list,
    ``add_callback`` appends to it; each only stores a callback the runner runs."""
    source = MINGPT_TRAINER.read_text()
    both = source.replace(
        "    def add_callback(",
        "    def set_callback(self, onevent: str, callback):\n"
        "        self.callbacks[onevent] = [callback]\n\n"
        "    def add_callback(",
    )
    assert both != source
    assert step_callbacks(_trainer_class(both)) == (
        ("add_callback", "callback", 1),
        ("set_callback", "callback", 1),
    )
    # a method that does more with the callbacks than store one is no registrar
    cleared = both.replace(
        "        self.callbacks[onevent] = [callback]\n",
        "        self.callbacks.clear()\n        self.callbacks[onevent] = [callback]\n",
    )
    assert step_callbacks(_trainer_class(cleared)) == ()
