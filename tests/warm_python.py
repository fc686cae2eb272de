"""A warm Python for the tests' subprocesses: ``import torch`` once, fork per run.

Every multi-process test starts interpreters that import torch, and on the 2-core
CI machine that import costs about 3 s of CPU: more than most fixture scripts
spend training. So the suites that start many of them (the soundness corpus, the
parity harness) run their interpreters through a *shim*: a tiny executable that
asks a server, which has imported torch already, to fork a child that runs the
command as a fresh ``python`` would. ``PYTHON_EXEC`` (torchrun's own override of
its workers' interpreter) sends the workers of ``accel-migrate launch`` there too.

The forked child is made to look like a fresh interpreter: its own process group,
the caller's stdin/stdout/stderr, working folder, environment, memory limit and
``sys.argv``/``sys.path[0]``; a traceback starts at the script's own first frame;
the exit code or signal comes back to the shim, which exits the same way. The
child dies when its shim does (a lifeline socket), so a timeout that kills the
shim's process group still stops everything below it: the server's process that
waits for the child kills the child's whole tree (``kill_tree``), processes in
sessions of their own included (torchrun starts its workers so; DataLoader
workers are forked below them), whose own shims then end their commands alike.

Anything the server cannot reproduce falls back to exec'ing the real interpreter:
options other than ``-u``/``-B`` with ``-m``/``-c``/a script, or an environment
that differs in what is read at start-up or by ``import torch`` (``PYTHON*``,
``OMP_*``, ``MKL_*``, ``TORCH_*`` but torchrun's ``TORCHELASTIC_*``...), and
everything when the server is not running. ``ACCEL_MIGRATE_TEST_WARM=0`` turns it
off (``python()`` is then ``sys.executable``).

This is test infrastructure only: it changes how fast the tests start processes,
never what the product does.
"""

from __future__ import annotations

import atexit
import importlib
import io
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

#: Environment variables that decide how an interpreter starts or how torch
#: imports; a request that differs from the server in one of them is exec'd.
_START_PREFIXES = (
    "PYTHON",
    "OMP_",
    "MKL_",
    "KMP_",
    "GOMP_",
    "OPENBLAS_",
    "LD_",
    "TORCH",
    "PYTORCH",
    "CUDA",
    "LC_",
    "LANG",
)
#: Read by torchrun's workers at run time, not at import: they may differ.
_RUNTIME_PREFIXES = ("TORCHELASTIC_", "TORCH_NCCL_", "PYTHON_EXEC")
_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
_SIGNALS += (signal.SIGUSR1, signal.SIGUSR2)


#: Modules the server imports after torch (none starts a thread).
PRELOADED = (
    "torch._dynamo",
    "torch.distributed.run",
    "torch.distributed.fsdp",
    "torch.distributed.checkpoint",
)


#: What the ``codemod`` server imports instead: what ``accel-migrate migrate``
#: loads (the CLI, every rule, libcst, black), for the corpus's batch-mode
#: migrations, each a process of its own (0.9 s of CPU of imports in a fresh
#: interpreter, about half of what migrating a project folder costs). Not all of
#: ``accel_migrate.cli``: ``launch_command`` imports torch. (A rule is registered
#: by importing its module; the engine imports every rule module already, so the
#: server's rules are the CLI's: tests/test_warm_python.py checks it.)
CODEMOD_PACKAGES = ("accel_migrate.codemod",)
CODEMOD_MODULES = (
    "accel_migrate.cli.app",
    "accel_migrate.cli.migrate_command",
    "accel_migrate.cli.batch",
    "black",
    "pathspec",
    "libcst.native",
)
#: What a server imports before it forks: ``torch`` (every command of the tests
#: but the CLI's migrations) or ``codemod`` (those, which never import torch).
KINDS = ("torch", "codemod")


_IMPORTS_SET: dict[str, str] = {}
_SHIM_PATH = ""
#: The server's own PYTHONPATH entries, as they sit on its sys.path.
_SERVER_PATH: list[str] = []


def _start_environment(env: dict[str, str]) -> dict[str, str]:
    """What a server's interpreter must have started with for a command: PYTHONPATH
    aside, which the child applies to its own ``sys.path`` (``_python_path``)."""
    return {
        key: value
        for key, value in env.items()
        if key.startswith(_START_PREFIXES)
        and not key.startswith(_RUNTIME_PREFIXES)
        and key != "PYTHONPATH"
    }


def _path_entries(value: str, cwd: str) -> list[str]:
    """PYTHONPATH's entries as a fresh interpreter puts them on sys.path (absolute)."""
    return [
        os.path.abspath(os.path.join(cwd, entry)) for entry in value.split(os.pathsep)
    ]


def _shadowed(entries: list[str]) -> str:
    """A module the server has imported that a new PYTHONPATH entry would have given
    a fresh interpreter from elsewhere ("" when none)."""
    loaded = {name.partition(".")[0] for name in sys.modules}
    for entry in entries:
        if entry in _SERVER_PATH or not os.path.isdir(entry):
            continue
        for name in os.listdir(entry):
            stem = name.partition(".")[0]
            if stem in loaded and (name == stem or name.endswith((".py", ".so"))):
                return f"{entry} has {name}, imported already"
    return ""


# -- the test side ------------------------------------------------------------------

_LOCK = threading.Lock()
#: One server per start-up environment (see ``_start_environment``), per process.
_SERVERS: dict[
    tuple[str, frozenset[tuple[str, str]], str], tuple[subprocess.Popen[bytes], Path]
] = {}


def enabled() -> bool:
    return os.environ.get("ACCEL_MIGRATE_TEST_WARM", "1") != "0"


def python(env: dict[str, str], kind: str = "torch") -> str:
    """The interpreter to run a command with ``env`` under: the shim of a server
    of that ``kind`` (``KINDS``) started (once per test process) with that
    environment, or ``sys.executable`` (turned off, or an environment whose
    ``import torch`` starts threads: a fork of a threaded process can deadlock)."""
    if not enabled() or env.get("OMP_NUM_THREADS") != "1":
        return sys.executable
    if kind not in KINDS:
        raise ValueError(f"no warm server of kind {kind!r}")
    # (a codemod server has imported accel_migrate: a command whose PYTHONPATH
    # has another entry would be found shadowed and exec'd, so one per PYTHONPATH)
    path = env.get("PYTHONPATH", "") if kind == "codemod" else ""
    key = (kind, frozenset(_start_environment(env).items()), path)
    with _LOCK:
        found = _SERVERS.get(key)
        if found is None or found[0].poll() is not None:
            found = _SERVERS[key] = _start(env, kind)
        return str(found[1])


def executable() -> str:
    """The interpreter for a test's own ``subprocess`` commands under this process's
    environment (tests/conftest.py gives the session ``OMP_NUM_THREADS=1``)."""
    return python(dict(os.environ))


def launcher() -> list[str]:
    """``accel-migrate launch`` for a test's own command, from ``executable()``."""
    return [executable(), "-m", "accel_migrate", "launch"]


def environment(env: dict[str, str]) -> dict[str, str]:
    """``env`` with torchrun's workers sent to a shim (torchrun gives them
    ``OMP_NUM_THREADS=1`` where it is unset, with more than one process)."""
    workers = {**env, "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", "1")}
    shim = python(workers)
    return {**env, "PYTHON_EXEC": shim} if shim != sys.executable else env


def _start(env: dict[str, str], kind: str) -> tuple[subprocess.Popen[bytes], Path]:
    folder = Path(tempfile.mkdtemp(prefix="accel-migrate-warm-"))
    sock = folder / "server.sock"
    shim = folder / "python"
    signals = tuple(int(number) for number in _SIGNALS)
    root = Path(__file__).resolve().parents[1]
    # Run as a file, not ``-m tests.warm_python``: no ``tests`` package is left in
    # the children's sys.modules.
    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), str(sock), kind],
        cwd=root,
        env=env,
        stdin=subprocess.PIPE,
        start_new_session=True,
    )
    started = process_stat(server.pid)
    shim.write_text(
        _SHIM.format(
            real=sys.executable,
            sock=str(sock),
            signals=signals,
            server=server.pid,
            started=-1 if started is None else started.start,
            limit=SHIM_WAIT,
        )
    )
    shim.chmod(0o755)
    atexit.register(_stop, server, folder)
    return server, shim


def _stop(server: subprocess.Popen[bytes], folder: Path) -> None:
    if server.stdin is not None:
        server.stdin.close()  # the server's end of life
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
    for name in ("server.sock", "python"):
        (folder / name).unlink(missing_ok=True)
    folder.rmdir()


#: Seconds a shim waits for a server that is still starting (importing torch: 3 s
#: of CPU, far more on a loaded machine) before it says so and runs the real
#: interpreter. Below every subprocess timeout of the tests that start their
#: commands through a shim (the smallest, 120 s; a test's own budget is
#: ``timeout(seconds)``), so that a slow server shows as the shim's message and
#: a run that goes on, not as the test's TimeoutExpired (it was 180 s, above
#: them: r32b).
SHIM_WAIT = 90


def timeout(seconds: float) -> float:
    """A subprocess timeout for a command started through a shim: ``seconds``
    of its own work, after what the shim may wait for the server."""
    return SHIM_WAIT + seconds


#: The shim: stdlib only, no site (-IS), so it starts in milliseconds. It waits
#: for the server's socket while the server is alive and starting (it imports
#: torch first), up to SHIM_WAIT seconds, then says so and runs the real
#: interpreter; a server that has exited (the session is ending) is not waited
#: for. (A fixed 15 s wait ran out under load: r31d.)
_SHIM = """#!{real} -IS
import json, os, resource, signal, socket, sys, time
REAL, SOCK = {real!r}, {sock!r}
SERVER, STARTED, LIMIT = {server}, {started}, {limit}

def real():
    os.execv(REAL, [REAL, *sys.argv[1:]])

def starting():
    try:
        with open("/proc/%d/stat" % SERVER, "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
    except OSError:
        return False
    return fields[0] != b"Z" and int(fields[19]) == STARTED

connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
deadline = time.monotonic() + LIMIT
while True:
    try:
        connection.connect(SOCK)
        break
    except (FileNotFoundError, ConnectionRefusedError):
        if not starting():
            real()
        if time.monotonic() > deadline:
            sys.stderr.write(
                "tests/warm_python.py: the warm server (pid %d) has not answered on "
                "%s in %d s; running the real interpreter\\n" % (SERVER, SOCK, LIMIT)
            )
            real()
        time.sleep(0.05)
try:
    limit = resource.getrlimit(resource.RLIMIT_AS)
    request = dict(argv=sys.argv[1:], cwd=os.getcwd(), env=dict(os.environ), limit=limit)
    socket.send_fds(connection, [json.dumps(request).encode() + b"\\n"], [0, 1, 2])
    replies = connection.makefile("r")
    kind, _, value = replies.readline().strip().partition(" ")
except OSError:
    real()
if kind != "pid":
    connection.close()
    real()
pid = int(value)


def forward(number, frame):
    # the command may have ended already (torchrun's SIGTERM to a finished
    # rank): its own exit is what the reply below says
    try:
        os.kill(pid, number)
    except ProcessLookupError:
        pass


for number in {signals}:
    signal.signal(number, forward)
kind, _, value = replies.readline().strip().partition(" ")
if kind == "signal":
    if int(value) != signal.SIGKILL:
        signal.signal(int(value), signal.SIG_DFL)
    os.kill(os.getpid(), int(value))
os._exit(int(value) if kind == "exit" else 1)
"""


# -- the server side ----------------------------------------------------------------


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def serve(path: str, kind: str = "torch") -> tuple[socket.socket, dict]:
    """Accept requests until stdin closes; returns only in a forked child that is to
    run a request (the connection and the request)."""
    import selectors

    if kind == "torch":
        import torch  # noqa: F401  (the point of the server)

    global _SHIM_PATH, _SERVER_PATH
    _SHIM_PATH = os.path.join(os.path.dirname(path), "python")
    _SERVER_PATH = (
        _path_entries(os.environ["PYTHONPATH"], os.getcwd())
        if os.environ.get("PYTHONPATH")
        else []
    )

    start = _start_environment(dict(os.environ))
    before = dict(os.environ)
    # What nearly every command imports next, and the costliest part of it:
    # building any torch optimizer imports torch._dynamo (2.5 s of CPU here, as
    # much as torch itself); the launcher and the runtime import torch.distributed.
    preloaded = (
        PRELOADED
        if kind == "torch"
        else [*_modules(CODEMOD_PACKAGES), *CODEMOD_MODULES]
    )
    for name in preloaded:
        importlib.import_module(name)
    # torchrun's rendezvous calls inspect.stack() 18 times per launch; inspect's
    # first look-up of a frame's module reads the file of every loaded module.
    # Done here once, the launchers inherit the result (a cache: nothing else).
    import inspect

    inspect.getmodule(sys._getframe())
    # Variables those imports set (TORCHINDUCTOR_CACHE_DIR): a fresh interpreter
    # would have set them too, where the caller had not.
    global _IMPORTS_SET
    _IMPORTS_SET = {k: v for k, v in os.environ.items() if before.get(k) != v}
    # A forked copy of a threaded process can deadlock on a lock another thread
    # held; with OMP_NUM_THREADS=1 importing torch starts none.
    threaded = _threads() != 1
    # Every object the server holds now (torch's, _dynamo's: a heap of hundreds of
    # MB) is moved out of the collector's sight: a collection in a forked child
    # writes the header of every object it visits, so the first full one (finish()
    # runs one at every exit) copied the server's whole heap into the child, 0.16 s
    # of CPU in a child that ran nothing (gc.freeze's own use: a pre-fork server).
    # The child's own objects are collected as before.
    import gc

    gc.collect()
    gc.freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # monitors are reaped by the kernel
    events = selectors.DefaultSelector()
    events.register(listener, selectors.EVENT_READ)
    events.register(sys.stdin, selectors.EVENT_READ)
    while True:
        for key, _ in events.select():
            if key.fileobj is sys.stdin:
                listener.close()
                os._exit(0)
            connection, _ = listener.accept()
            if os.fork() == 0:
                events.close()
                listener.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                found = _monitor(connection, start, threaded)
                if found is not None:
                    return found
                os._exit(0)
            connection.close()


def _modules(packages: tuple[str, ...]) -> list[str]:
    """Every module of ``packages``, subpackages' included."""
    import pkgutil

    found = []
    for name in packages:
        package = importlib.import_module(name)
        found += [
            module.name
            for module in pkgutil.walk_packages(package.__path__, f"{name}.")
        ]
    return found


def _monitor(
    connection: socket.socket, start: dict[str, str], threaded: bool
) -> tuple | None:
    """Read the request, fork the child that runs it (returning in the child), wait
    for it and report how it ended. None in the monitor once it has reported."""
    message, fds, _, _ = socket.recv_fds(connection, 1 << 20, 3)
    while not message.endswith(b"\n"):
        more = connection.recv(1 << 20)
        if not more:
            return None
        message += more
    request = json.loads(message)
    plan = _plan(request["argv"])
    why = _why_not(plan, request["env"], request["cwd"], start, threaded)
    if why:
        _log(f"exec {request['argv'][:3]}: {why}", request["env"])
        connection.sendall(b"exec\n")
        return None
    child = os.fork()
    if child == 0:
        return connection, {**request, "fds": fds, "plan": plan}
    for fd in fds:
        os.close(fd)
    connection.sendall(f"pid {child}\n".encode())
    _, status, usage = _wait(connection, child)
    _log_cpu(request, usage)
    if os.WIFSIGNALED(status):
        report = f"signal {os.WTERMSIG(status)}\n"
    else:
        report = f"exit {os.waitstatus_to_exitcode(status)}\n"
    try:
        connection.sendall(report.encode())
    except OSError:  # the shim is gone (killed): nobody to tell
        pass
    return None


def _wait(
    connection: socket.socket, child: int
) -> tuple[int, int, resource.struct_rusage]:
    """``os.wait4(child)``, killing the child's whole tree first if the shim goes
    (the lifeline: the shim was killed, by a timeout). Here, not in a thread of
    the child, so that a child stuck holding the GIL is stopped too."""
    import selectors

    events = selectors.DefaultSelector()
    events.register(connection, selectors.EVENT_READ)
    try:
        exited = os.pidfd_open(child)
        events.register(exited, selectors.EVENT_READ)
    except OSError:  # (no pidfd here: look every 0.2 s)
        exited = -1
    every = None if exited >= 0 else 0.2
    try:
        while True:
            found = os.wait4(child, os.WNOHANG)
            if found[0] == child:
                return found
            if any(key.fileobj is connection for key, _ in events.select(every)):
                try:
                    gone = not connection.recv(1, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    gone = False
                except OSError:
                    gone = True
                if gone:
                    kill_tree(child)
                    events.unregister(connection)
    finally:
        events.close()
        if exited >= 0:
            os.close(exited)


class ProcessStat(NamedTuple):
    """What the tests read of ``/proc/PID/stat``."""

    #: "R", "S", "Z" (exited, not yet reaped)...
    state: str
    parent: int
    #: Clock ticks after boot: with the pid, what tells a process from a later
    #: one given the same pid.
    start: int


def process_stat(pid: int) -> ProcessStat | None:
    """A process's state, parent and start time; None once it is gone (or where
    there is no /proc). The one reader of /proc/PID/stat of the tests (the
    shim's own, stdlib-only and inline, reads the same fields)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # (after the command's name, which may hold spaces and parentheses)
            fields = stat.read().rpartition(b")")[2].split()
    except OSError:
        return None
    return ProcessStat(fields[0].decode(), int(fields[1]), int(fields[19]))


def _children() -> dict[int, list[tuple[int, int]]]:
    """Every process's children, with their start times, from /proc (a process
    that has exited between the listing and the read is left out)."""
    found: dict[int, list[tuple[int, int]]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        stat = process_stat(int(name))
        if stat is not None:
            found.setdefault(stat.parent, []).append((int(name), stat.start))
    return found


def _signal(pid: int, start: int, number: int) -> bool:
    """Send ``number`` to the process ``pid`` that started at ``start``, never to
    another that has been given its pid since it exited: the pidfd opened first
    pins the process, whose start time is then checked. False where it is gone."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except OSError:  # (no pidfd here: the check and the kill are not atomic)
        handle = -1
    try:
        stat = process_stat(pid)
        if stat is None or stat.start != start:
            return False
        if handle >= 0:
            signal.pidfd_send_signal(handle, number)
        else:
            os.kill(pid, number)
        return True
    except ProcessLookupError:
        return False
    finally:
        if handle >= 0:
            os.close(handle)


def kill_tree(root: int) -> set[int]:
    """SIGKILL ``root`` and every process below it, in whatever process group or
    session: each is stopped first (SIGSTOP) and the tree read again until no new
    one appears, so none forks away or is orphaned (its parent killed, moved under
    init) before it is found. A process is known by its pid and start time, and
    signalled through a pidfd after its start time is checked: one that exited
    and whose pid was given to an unrelated process meanwhile is left alone (the
    callers pass a ``root`` they have not reaped yet, which keeps its pid). The
    pids it signalled."""
    found = process_stat(root)
    if found is None:
        return set()
    stopped: set[tuple[int, int]] = set()
    while True:
        children = _children()
        tree: set[tuple[int, int]] = set()
        todo = [(root, found.start)]
        while todo:
            process = todo.pop()
            if process not in tree:
                tree.add(process)
                # (a child starts after its parent: others are a later
                # process's, given the pid of one that has exited)
                todo.extend(
                    c for c in children.get(process[0], ()) if c[1] >= process[1]
                )
        new = tree - stopped
        if not new:
            break
        for pid, start in new:
            _signal(pid, start, signal.SIGSTOP)
        stopped |= new
    return {pid for pid, start in stopped if _signal(pid, start, signal.SIGKILL)}


def _why_not(
    plan: dict | None,
    env: dict[str, str],
    cwd: str,
    start: dict[str, str],
    threaded: bool,
) -> str:
    if plan is None:
        return "options"
    if threaded:
        return "the server has threads"
    # (a command started by one run here inherits what the preloaded imports set)
    inherited = {k: v for k, v in env.items() if _IMPORTS_SET.get(k) != v}
    differ = sorted(set(_start_environment(inherited).items()) ^ set(start.items()))
    if differ:
        return f"environment differs in {sorted({k for k, _ in differ})}"
    return (
        _shadowed(_path_entries(env.get("PYTHONPATH", ""), cwd))
        if env.get("PYTHONPATH")
        else ""
    )


def _log(line: str, env: dict[str, str]) -> None:
    path = env.get("ACCEL_MIGRATE_TEST_WARM_LOG")
    if path:
        with open(path, "a") as log:
            log.write(line + "\n")


def _log_cpu(request: dict, usage: resource.struct_rusage) -> None:
    """``ACCEL_MIGRATE_TEST_WARM_CPU=path``: one line per command run here, its CPU
    seconds (with its own waited children: wait4), the test and the command, to see
    where the suite's CPU goes (docs/performance.md, "The test suite's time")."""
    path = request["env"].get("ACCEL_MIGRATE_TEST_WARM_CPU")
    if path:
        test = request["env"].get("PYTEST_CURRENT_TEST", "-").split(" ")[0]
        command = " ".join(request["argv"])[:300].replace("\t", " ")
        seconds = usage.ru_utime + usage.ru_stime
        with open(path, "a") as log:
            log.write(f"{seconds:.2f}\t{test}\t{command}\n")


def _plan(argv: list[str]) -> dict | None:
    """What ``python ARGV`` runs, for the forms the server reproduces."""
    unbuffered = False
    for index, argument in enumerate(argv):
        if argument == "-u":
            unbuffered = True
        elif argument == "-B":
            continue
        elif argument in ("-m", "-c") and index + 1 < len(argv):
            kind = "module" if argument == "-m" else "code"
            return dict(
                kind=kind, target=argv[index + 1], args=argv[index + 2 :], u=unbuffered
            )
        elif argument.startswith("-"):
            return None
        else:
            return dict(
                kind="path", target=argument, args=argv[index + 1 :], u=unbuffered
            )
    return None


def run(connection: socket.socket, request: dict) -> None:
    """In the forked child: become the requested interpreter and run the command."""
    os.setpgid(0, 0)
    for number in _SIGNALS:
        if number != signal.SIGINT:
            signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in zip((0, 1, 2), request["fds"], strict=True):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    _python_path(os.environ.get("PYTHONPATH", ""))
    for name, value in _IMPORTS_SET.items():
        os.environ.setdefault(name, value)
    if os.environ.get("ACCEL_MIGRATE_TEST_WARM_EXECUTABLE") == "1":
        # Asked for by a test whose command starts more Python (verify starts the
        # original and the launcher with sys.executable): those are warm too.
        sys.executable = _SHIM_PATH
    import resource

    resource.setrlimit(resource.RLIMIT_AS, tuple(request["limit"]))
    _fresh_random_state()
    plan = request["plan"]
    unbuffered = plan["u"] or bool(os.environ.get("PYTHONUNBUFFERED"))
    _stdio(unbuffered)
    # The lifeline is the server's process that waits for this one (``_wait``).
    connection.close()
    sys.dont_write_bytecode = sys.dont_write_bytecode or "-B" in request["argv"]
    import runpy
    import types

    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main  # this module's functions keep their globals
    try:
        if plan["kind"] == "module":
            sys.argv = ["-m", *plan["args"]]
            sys.path[0] = os.getcwd()
            runpy._run_module_as_main(plan["target"], alter_argv=True)  # type: ignore[attr-defined]
        else:
            if plan["kind"] == "code":
                sys.argv = ["-c", *plan["args"]]
                sys.path[0] = ""
                name, source = "<string>", plan["target"]
            else:
                name = plan["target"]
                sys.argv = [name, *plan["args"]]
                sys.path[0] = os.path.dirname(os.path.realpath(name))
                with io.open_code(name) as file:
                    source = file.read()
                main.__file__ = name
                main.__cached__ = None
            main.__builtins__ = __builtins__
            main.__spec__ = None
            main.__package__ = None
            # dont_inherit: this module's `from __future__ import annotations`
            # would make the script's annotations strings (a dataclass of typed
            # options read by argparse then fails: round t12b's electra arg.py)
            exec(compile(source, name, "exec", dont_inherit=True), main.__dict__)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        _report(*sys.exc_info())
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        _report(*sys.exc_info())
        sys.exit(1)


def _python_path(value: str) -> None:
    """The server's PYTHONPATH entries on sys.path (after the script's folder)
    replaced by this command's, where a fresh interpreter has them."""
    rest = list(sys.path[1:])
    for entry in _SERVER_PATH:
        if entry in rest:
            rest.remove(entry)
    ours = _path_entries(value, os.getcwd()) if value else []
    sys.path[1:] = [*dict.fromkeys(ours), *(e for e in rest if e not in ours)]


def _fresh_random_state() -> None:
    """Python's and numpy's global generators are seeded from OS entropy when they
    are imported: every fork would share the server's. A fresh interpreter's are
    its own (torch's default generator has a fixed seed, so it needs nothing)."""
    import random

    random.seed()
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()


def _report(kind: type, value: BaseException, tb: TracebackType | None) -> None:
    """The traceback a fresh interpreter prints: from the command's own first frame."""
    ours = os.path.realpath(__file__)
    while tb is not None and os.path.realpath(tb.tb_frame.f_code.co_filename) == ours:
        tb = tb.tb_next
    value.__traceback__ = tb
    sys.excepthook(kind, value, tb)


def _stdio(unbuffered: bool) -> None:
    """New stdin/stdout/stderr on fds 0-2, buffered as a fresh interpreter's are."""
    encoding, errors = sys.stdout.encoding, sys.stdout.errors

    def writer(fd: int, error_stream: bool) -> io.TextIOWrapper:
        raw = io.FileIO(fd, "w", closefd=False)
        tty = raw.isatty()
        buffer = raw if unbuffered else io.BufferedWriter(raw)
        return io.TextIOWrapper(
            buffer,  # type: ignore[arg-type]
            encoding=encoding,
            errors="backslashreplace" if error_stream else errors,
            line_buffering=tty or (error_stream and not unbuffered),
            write_through=unbuffered,
        )

    sys.stdout = sys.__stdout__ = writer(1, False)
    sys.stderr = sys.__stderr__ = writer(2, True)
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(
        io.BufferedReader(io.FileIO(0, "r", closefd=False)),
        encoding=encoding,
        errors=errors,
    )


def _exit_status(exit: SystemExit) -> int:
    """The status ``python`` exits with for an uncaught ``SystemExit`` (printing a
    message that is not a number, as it does)."""
    code = exit.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def finish(status: int) -> None:
    """End the command as a fresh interpreter ends, without its teardown of every
    module: with torch loaded that teardown costs a forked child 0.8 s of CPU
    (freeing, and first copying, the server's whole heap), most of what a short
    command costs here. What a script can see of an interpreter's exit is kept:
    its non-daemon threads are waited for, its atexit callbacks run, the objects
    its module holds are finalized (an unclosed file's buffer is written), and
    the standard streams are flushed."""
    import gc

    try:
        threading._shutdown()  # type: ignore[attr-defined]
    except BaseException:  # (python, too, goes on to exit)
        pass
    atexit._run_exitfuncs()
    main = sys.modules.get("__main__")
    if main is not None:
        main.__dict__.clear()
    gc.collect()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status & 0xFF)


if __name__ == "__main__":
    _connection, _request = serve(sys.argv[1], *sys.argv[2:3])
    try:
        run(_connection, _request)
    except SystemExit as _exit:
        finish(_exit_status(_exit))
    finish(0)
