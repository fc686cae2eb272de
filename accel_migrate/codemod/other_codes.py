"""Finding codes that are not rules: the screen's (AM100) and the suppression
comments' (AM101). They have rule pages (docs/rules/) like the rules, are listed by
``accel-migrate rules``, and are selected and ignored like rule codes.

Light: no libcst (the CLI reads the names for reports).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OtherCode:
    code: str
    name: str
    summary: str
    #: The rule page, in the rules' docstring layout (What / Why / Example / Fix safety).
    doc: str


ALREADY_DISTRIBUTED = OtherCode(
    "AM100",
    "already-distributed",
    "the file already trains on many processes: it is left unchanged",
    """AM100 already-distributed: the file already trains on many processes; it is left unchanged.

## What
Not a rewrite: the screen that runs before every rule. A file that already
trains on many processes is skipped as a whole, with one info finding at the
first such use, naming it: ``torch.distributed`` (a process group, collectives,
DDP, FSDP, ``DistributedSampler``, RPC, device meshes, the elastic launcher),
``torch.multiprocessing.spawn`` / ``start_processes`` / ``Process``, ``mpi4py``,
or a model's ``share_memory()`` (Hogwild). The summary counts it as "skipped
(already distributed)".

## Why
Its author already chose how the processes split the work: migrating it again
would wrap a wrapped model, shard data twice or start a second process group.
Files that an already-distributed script imports are left alone too (their
rewrites could change what that script runs).

## Example
```python
# before
import torch.distributed as dist
dist.init_process_group("nccl")
model = torch.nn.parallel.DistributedDataParallel(model)
# after
import torch.distributed as dist  # unchanged: AM100, already distributed
dist.init_process_group("nccl")
model = torch.nn.parallel.DistributedDataParallel(model)
```

## Fix safety
Nothing is rewritten. To migrate such a file anyway, take out its own
distributed setup first; ``--ignore AM100`` only hides the finding.
""",
)

UNUSED_SUPPRESSION = OtherCode(
    "AM101",
    "unused-suppression",
    "a `# accel-migrate: skip` comment that suppresses nothing, or names no rule",
    """AM101 unused-suppression: a `# accel-migrate: skip` comment that suppresses nothing, or names no rule.

## What
Reports, at the comment, a suppression that does nothing, as ruff's RUF100 does
for ``noqa``:

- info: the file migrated without the comment gives no finding (no rewrite, no
  review) inside the statement it marks, for every rule (``skip``) or for the
  rules it names (``skip[AM010, AM011]``);
- info: the comment marks no statement (written on a line of its own, above
  the statement, where it applies to nothing), or ``skip[]`` names no rule;
- needs-review: a code in the brackets that names no rule (a typo such as
  ``skip[AM07]`` would otherwise let the rewrite it meant to stop happen).

Select or ignore it like a rule (``--ignore AM101``). The check migrates a
file with such comments a second time, without them; files without one pay
nothing. When the file without the comments would be left unchanged as a whole
(a blocking finding), unused suppressions are not reported.

## Why
A suppression outlives the code it was written for: after a refactor, a stale
``skip`` hides nothing today and silently hides a rewrite tomorrow.

## Example
```python
# before
total = 0  # accel-migrate: skip
loss.backward()  # accel-migrate: skip[AM999]
# after
total = 0  # accel-migrate: skip   (AM101: unused suppression)
accel.backward(loss)  # accel-migrate: skip[AM999]   (AM101: AM999 is not a rule code)
```

## Fix safety
Nothing is rewritten: remove the comment, or correct its codes.
""",
)

LIBRARY_MODULE = OtherCode(
    "AM102",
    "library-module",
    "a helper module that another file of the batch imports: migrated at the call sites",
    """AM102 library-module: a helper module that another file of the batch imports is migrated at the call sites.

## What
Not a rewrite: a decision of batch mode (several files or a folder). A file of
the batch that another migrated file of the batch imports, and that runs no
backward pass of its own (``utils.py`` with ``get_test_dataloader()``,
``models/__init__.py`` with ``get_network(args)``, a ``Logger`` class), is left
unchanged, with one info finding naming the importing file. That file's rules
have read it (the project view) and migrated its helpers where they are called:
``accel.prepare_dataloader(utils.get_test_dataloader(...))``,
``accel.on_main_process(save_checkpoint, ...)``. Its own needs-review findings
are kept.

## Why
The batch then gives what ``accel-migrate train.py`` gives for the entry point
alone (helper modules are read, never written): one place where each loader and
model is prepared, and the helper still works, unchanged, for the other scripts
that import it. A helper module with a backward pass of its own (a library
trainer such as minGPT's ``trainer.py``) is migrated as a training file.

Two kinds of helper module are migrated in their own right, for the batch's
calls of them, by every rule but those that prepare (AM004, AM005, AM006):

- one whose function another file hands a loader at every call
  (``evaluate(model, test_loader)``, ``predict(model, loader)``): the caller
  shards the loader, so what the function sums, collects or logs over it is
  reduced there (AM009, AM029, AM008), as in a training file; the loaders the
  module builds itself are not taken for sharded ones;
- one whose helper the batch calls and that writes files or prints and does
  more besides (``save_snapshot`` that saves, removes the last snapshot and
  returns the new path; a ``Logger`` class that keeps ``sys.stdout`` and an
  open file; a progress bar with ``global`` timers). Moved to the main process
  at its call, the other processes would miss what it hands back or keeps, and
  the state dicts it gathers (a collective under FSDP) would wait forever. Its
  writes and prints are placed in its own file instead (``accel.save``,
  ``accel.on_main_process(os.remove, ...)``, ``accel.print``), and the call
  stays on every process, followed by ``accel.barrier()`` when the helper
  writes files, so that no process reads them before the main process has
  written them.

Their loaders, models and optimizers are still prepared where they are called.
A write such a module makes where no barrier can follow it (in a method of a
class, or read back in its own function) leaves it unchanged (AM036). If the
module is left unchanged (a needs-review finding, ``# accel-migrate:
skip-file``), the files that call it are left unchanged too (AM103). A module
that calls collectives itself is left to its callers.

## Example
```python
# utils.py, imported by train.py: unchanged (AM102)
def get_test_dataloader(batch_size):
    return DataLoader(test_set, batch_size=batch_size)
# train.py
test_loader = accel.prepare_dataloader(utils.get_test_dataloader(args.b))
```

## Fix safety
Nothing is rewritten in a helper module, except in the two kinds above, which
are rewritten as a training file is, less the preparing rules. To migrate a module on its own, run accel-migrate on that file
alone.
""",
)

SETUP_LEFT_WHOLE = OtherCode(
    "AM103",
    "setup-left-whole",
    "a file that imports a training file of the batch left unchanged: left unchanged too",
    """AM103 setup-left-whole: a file that imports a training file of the batch that is left unchanged is left unchanged too.

## What
Not a rewrite: a decision of batch mode, made after every file of the batch was
migrated. A file that would change and that imports another file of the batch
which runs a backward pass of its own (a training engine: ``engine.py`` with
``train_one_epoch(model, optimizer, loader)``), where that file is left unchanged
by a needs-review finding (a training setup it cannot prove), is left unchanged
too, with one needs-review finding at the import, naming the imported file. Its other findings
are dropped: they describe the file as it would have been migrated. The other
way round too: a training file of the batch whose importer is left unchanged
(the importer builds the model and the loaders it hands a ``Trainer`` class or
an ``engine.train_one_epoch`` of that file) is left unchanged, with one finding
at its first line naming the importer. The same holds for a helper module migrated
for its callers (AM102: its writes, prints and sums over the loaders they hand
it): left unchanged, its importers are left unchanged too, since their calls of
it stay on every process and their loaders are sharded. A module with no
backward that prepares loaders of its own (FeatureLearningRotNet's
dataloader.py) is left unchanged where its importer is no training entry point
of its own and runs the training of a file of the batch that is not migrated
(``getattr(alg, name)(config).solve(dloader_train, dloader_test)``): its loaders
would be split for a training that each process runs whole; and so is one that
no migrated file of the batch imports, directly or through others, while a
training file that does is left unchanged (ADDA's datasets/mnist.py, reached
through datasets/__init__.py and utils.py's ``get_data_loader`` from a main.py
whose training is left whole). When the file it names
is itself left unchanged only by such a finding (a chain: ``chargpt.py`` ->
``mingpt/trainer.py`` -> ``mingpt/utils.py`` -> ``mingpt/model.py``), the finding
also names the root cause: the first file down the chain left unchanged by a
finding of its own, with that finding's line, code and message.

## Why
A training setup is migrated whole or not at all. The importer builds the
model, the optimizer and the loaders, and the imported file runs the loop over
them: migrated alone, the importer would shard the loaders and prepare the model
for a loop that keeps its plain backward, its prints on every process and its
rank-local sums and decisions, or shard the data of a model that nothing
prepares, which then trains an unsynchronised copy in each process.

## Example
```python
# engine.py: left unchanged (AM004: a model its optimizer never reaches)
def train_one_epoch(model, optimizer, loader): ...
# train.py: unchanged too (AM103), instead of
loader = accel.prepare_dataloader(DataLoader(...))
train_one_epoch(model, optimizer, loader)
```

## Fix safety
Nothing is rewritten. Resolve the imported file's findings (or mark the
statements with ``# accel-migrate: skip``) and run the batch again: both files
are then migrated together.
""",
)

OTHER_CODES: tuple[OtherCode, ...] = (
    ALREADY_DISTRIBUTED,
    UNUSED_SUPPRESSION,
    LIBRARY_MODULE,
    SETUP_LEFT_WHOLE,
)
