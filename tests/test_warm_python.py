"""The warm interpreter the parity and soundness harnesses start processes with
(tests/warm_python.py) must look like a fresh ``python`` to the command: its
arguments, folder, environment, output, exit status, traceback and death by a
signal, and it must fall back to the real interpreter for what it cannot copy."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests import warm_python

pytestmark = pytest.mark.skipif(
    not warm_python.enabled(), reason="ACCEL_MIGRATE_TEST_WARM=0"
)

PROBE = """
import os, sys, torch
print("argv", sys.argv, "path0", sys.path[0] == os.path.dirname(os.path.realpath(__file__)))
print("name", __name__, "cwd", os.getcwd(), "flag", os.environ.get("PROBE_FLAG"))
print("own group", os.getpgid(0) == os.getpid(), "parent", os.getppid() != {caller})
print("torch ready", torch.ones(2).sum().item())
what = sys.argv[1] if len(sys.argv) > 1 else ""
if what == "raise":
    def inner():
        raise ValueError("from the probe")
    inner()
if what == "exit":
    sys.exit(7)
if what == "signal":
    os.kill(os.getpid(), signal.SIGTERM)
if what == "stdin":
    print("read", sys.stdin.read().strip())
"""


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("warm") / "probe.py"
    path.write_text("import signal\n" + PROBE.format(caller=os.getpid()))
    return path


def _run(
    env: dict[str, str], *args: str, cwd: Path, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [warm_python.python(env), *args],
        env={**env, "PROBE_FLAG": "on"},
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_runs_a_script_as_a_fresh_interpreter_would(
    env: dict[str, str], probe: Path
) -> None:
    done = _run(env, "-u", probe.name, "plain", cwd=probe.parent)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "argv ['probe.py', 'plain'] path0 True"
    assert lines[1] == f"name __main__ cwd {probe.parent} flag on"
    assert lines[2] == "own group True parent True"
    assert lines[3] == "torch ready 2.0"


def test_exit_status_traceback_and_signal_are_the_commands(
    env: dict[str, str], probe: Path
) -> None:
    raised = _run(env, str(probe), "raise", cwd=probe.parent)
    assert raised.returncode == 1
    frames = [line for line in raised.stderr.splitlines() if line.startswith("  File")]
    # from the script's own first frame, as `python probe.py` prints it
    assert frames[0].startswith(f'  File "{probe}", line ')
    assert frames[0].endswith(", in <module>") and frames[1].endswith(", in inner")
    assert raised.stderr.strip().endswith("ValueError: from the probe")
    assert _run(env, str(probe), "exit", cwd=probe.parent).returncode == 7
    killed = _run(env, str(probe), "signal", cwd=probe.parent)
    assert killed.returncode == -signal.SIGTERM
    read = _run(env, str(probe), "stdin", cwd=probe.parent, stdin="piped in\n")
    assert read.stdout.splitlines()[-1] == "read piped in"


GC_PROBE = """
import gc
class Cycle:
    def __init__(self):
        self.me = self
Cycle()
print("frozen", gc.get_freeze_count(), "visible", len(gc.get_objects()))
print("collected", gc.collect() > 0)
"""


def test_a_collection_visits_the_commands_objects_not_the_servers(
    env: dict[str, str], tmp_path: Path
) -> None:
    # The server's heap (torch and _dynamo: about a million objects) is frozen
    # before the first fork: a collection in the command, finish()'s at every
    # exit among them, would otherwise copy all of it into the child (0.16 s of
    # CPU per command). The command's own garbage is still collected.
    script = tmp_path / "gc_probe.py"
    script.write_text(GC_PROBE)
    done = _run(env, str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    words = done.stdout.split()
    frozen, visible = int(words[1]), int(words[3])
    assert frozen > 10 * visible, done.stdout
    assert done.stdout.splitlines()[1] == "collected True"


def test_what_it_cannot_copy_runs_the_real_interpreter(
    env: dict[str, str], probe: Path
) -> None:
    # -W is not an option the server reproduces; a different thread count is an
    # environment torch was not imported under: both exec the real interpreter,
    # whose parent is the shim's caller (this process), not the server.
    for args, extra in ((("-W", "ignore"), {}), ((), {"OMP_NUM_THREADS": "2"})):
        done = subprocess.run(
            [warm_python.python(env), *args, str(probe)],
            env={**env, **extra},
            cwd=probe.parent,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert done.returncode == 0, done.stderr
        assert "own group False parent False" in done.stdout


def test_the_shim_is_not_the_real_interpreter(env: dict[str, str]) -> None:
    assert warm_python.python(env) != sys.executable
    assert warm_python.environment(env)["PYTHON_EXEC"] == warm_python.python(env)


PATHS = """
import os, subprocess, sys
import helper_mod
print("helper", helper_mod.WHERE, "first", sys.path[1] == os.environ["EXPECT_FIRST"])
print("parent", os.getppid() != {caller})
# with ACCEL_MIGRATE_TEST_WARM_EXECUTABLE=1, the command's own Python is warm too
child = subprocess.run([sys.executable, "-c", "import os; print(os.getppid())"],
                       capture_output=True, text=True, check=True)
print("child warm", int(child.stdout) != os.getpid())
"""


def test_pythonpath_is_the_commands_unless_it_shadows_an_import(
    env: dict[str, str], tmp_path: Path
) -> None:
    script = tmp_path / "paths.py"
    script.write_text(PATHS.format(caller=os.getpid()))
    ours = tmp_path / "ours"
    ours.mkdir()
    (ours / "helper_mod.py").write_text("WHERE = 'ours'\n")
    extra = {
        "PYTHONPATH": str(ours),
        "EXPECT_FIRST": str(ours),
        "ACCEL_MIGRATE_TEST_WARM_EXECUTABLE": "1",
    }
    done = subprocess.run(
        [warm_python.python(env), str(script)],
        env={**env, **extra},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "helper ours first True",
        "parent True",  # run by the server
        "child warm True",  # its parent is the server's monitor, not the command
    ]
    # An entry with a module the server has imported (torch) would give a fresh
    # interpreter another torch: the real interpreter runs it.
    (ours / "torch").mkdir()
    (ours / "torch" / "__init__.py").write_text("")
    shadowed = subprocess.run(
        [warm_python.python(env), "-c", "import os; print(os.getppid())"],
        env={**env, **extra},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert shadowed.returncode == 0, shadowed.stderr
    assert int(shadowed.stdout) == os.getpid()


EXIT = """
import atexit, sys, threading, time
out = open(sys.argv[1], "w")
out.write("written, never closed\\n")
atexit.register(lambda: print("atexit ran"))

def late() -> None:
    time.sleep(0.2)
    with open(sys.argv[1] + ".thread", "w") as done:
        done.write("thread finished\\n")

threading.Thread(target=late).start()
print("script done")
if len(sys.argv) > 2:
    sys.exit(int(sys.argv[2]) if sys.argv[2].isdigit() else sys.argv[2])
"""


@pytest.mark.parametrize("how", ["end", "7", "a message"])
def test_it_exits_as_a_fresh_interpreter_does(
    env: dict[str, str], tmp_path: Path, how: str
) -> None:
    # The warm child skips the interpreter's teardown of every module (0.8 s of
    # CPU with torch loaded), not what a script can see of its exit: threads
    # waited for, atexit callbacks, its own objects finalized, streams flushed.
    script = tmp_path / "exits.py"
    script.write_text(EXIT)
    seen = []
    for python in (warm_python.python(env), sys.executable):
        out = tmp_path / f"out{len(seen)}.txt"
        done = subprocess.run(
            [python, str(script), str(out), *([] if how == "end" else [how])],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        thread = out.with_name(out.name + ".thread").read_text()
        seen.append(
            (done.returncode, done.stdout, done.stderr, out.read_text(), thread)
        )
    assert seen[0] == seen[1]
    assert seen[0][1] == "script done\natexit ran\n"
    assert seen[0][0] == {"end": 0, "7": 7, "a message": 1}[how]


def _shim(tmp_path: Path, server: int, started: int, limit: int) -> Path:
    shim = tmp_path / "python"
    shim.write_text(
        warm_python._SHIM.format(
            real=sys.executable,
            sock=str(tmp_path / "never.sock"),
            signals=(),
            server=server,
            started=started,
            limit=limit,
        )
    )
    shim.chmod(0o755)
    return shim


def test_the_shim_waits_for_a_starting_server_then_says_why_it_runs_python(
    tmp_path: Path,
) -> None:
    # a server alive but not listening (still importing torch, under load): the
    # shim waits while it lives, up to its limit (it was a fixed 15 s), then says
    # so and runs the real interpreter
    started = warm_python.process_stat(os.getpid())
    assert started is not None
    shim = _shim(tmp_path, os.getpid(), started.start, limit=1)
    done = subprocess.run(
        [str(shim), "-c", "print('real')"], capture_output=True, text=True, timeout=60
    )
    assert done.stdout == "real\n"
    assert "has not answered on" in done.stderr and "in 1 s" in done.stderr
    # a server that has exited (another start time for its pid) is not waited for
    shim = _shim(tmp_path, os.getpid(), started.start + 1, limit=60)
    done = subprocess.run(
        [str(shim), "-c", "print('real')"], capture_output=True, text=True, timeout=30
    )
    assert (done.stdout, done.stderr) == ("real\n", "")


def test_kill_tree_signals_a_process_by_its_pid_and_start_time(tmp_path: Path) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stat = warm_python.process_stat(sleeper.pid)
        assert stat is not None
        # another start time: a later process given this pid, left alone
        assert not warm_python._signal(sleeper.pid, stat.start - 1, signal.SIGKILL)
        assert sleeper.poll() is None
        assert warm_python.kill_tree(sleeper.pid) == {sleeper.pid}
        assert sleeper.wait(timeout=10) == -signal.SIGKILL
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_codemod_server_runs_the_cli_as_a_fresh_interpreter_would(
    env: dict[str, str], tmp_path: Path
) -> None:
    # The corpus's batch-mode migrations run `python -m accel_migrate migrate`
    # forked from a server that has imported the rules and libcst, not torch.
    shim = warm_python.python(env, "codemod")
    assert shim not in (sys.executable, warm_python.python(env))
    probe = tmp_path / "loaded.py"
    probe.write_text(
        "import os, sys\n"
        "print('torch' in sys.modules, 'accel_migrate.codemod.engine' in sys.modules)\n"
        "print(os.getppid() != int(sys.argv[1]))\n"
    )
    done = _run(env, str(probe), str(os.getpid()), cwd=tmp_path)
    loaded = subprocess.run(
        [shim, str(probe), str(os.getpid())],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.split() == ["True", "False", "True"], done.stderr
    assert loaded.stdout.split() == ["False", "True", "True"], loaded.stderr
    outputs = []
    for python in (shim, sys.executable):
        folder = tmp_path / str(len(outputs))
        folder.mkdir()
        (folder / "train.py").write_text(
            "import torch\nmodel = torch.nn.Linear(2, 1)\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "for x in torch.randn(4, 2):\n"
            "    opt.zero_grad()\n    model(x).sum().backward()\n    opt.step()\n"
        )
        command = [python, "-m", "accel_migrate", "migrate", str(folder)]
        command += ["--write", "--no-cache", "--output-format", "json", "--jobs", "1"]
        migrated = subprocess.run(
            command, env=env, cwd=folder, capture_output=True, text=True, timeout=120
        )
        written = (folder / "train.py").read_text()
        outputs.append((migrated.returncode, migrated.stdout.replace(str(folder), "F")))
        outputs[-1] += (written,)
    assert outputs[0] == outputs[1]
    assert "accel_migrate" in outputs[0][2]
    # a rule is registered by importing its module: the server imports every
    # module of the package, which must register the rules the engine does
    rules = tmp_path / "rules.py"
    rules.write_text(
        "import accel_migrate.codemod.engine\n"
        "from accel_migrate.codemod.rule import registered_rules\n"
        "print(' '.join(rule.code for rule in registered_rules()))\n"
    )
    registered = [
        subprocess.run(
            [python, str(rules)], env=env, capture_output=True, text=True, timeout=120
        ).stdout
        for python in (shim, sys.executable)
    ]
    assert registered[0] == registered[1] and "AM001" in registered[0]
    # the server has imported accel_migrate: a command with another PYTHONPATH
    # gets a server of its own, not an exec'd real interpreter
    other = {**env, "PYTHONPATH": str(tmp_path)}
    assert warm_python.python(other, "codemod") not in (shim, sys.executable)
    done = subprocess.run(
        [warm_python.python(other, "codemod"), str(probe), str(os.getpid())],
        env=other,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.split() == ["False", "True", "True"], done.stderr
