"""Fixtures: the repository root, the CLI binary, and a real two-node Ray cluster on loopback."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    # Shipped files are named from the repository root, as in the README.
    monkeypatch.chdir(ROOT)


@pytest.fixture(scope="session")
def cli():
    """The `tessera` binary (`cargo build --release` or the test command builds it)."""
    b = os.environ.get("TESSERA_BIN") or str(ROOT / "target" / "release" / "tessera")
    if not Path(b).exists():
        pytest.fail(f"no tessera binary at {b}: run `cargo build --release` (or set TESSERA_BIN)")

    def run(*args, check=True):
        p = subprocess.run([b, *args], cwd=ROOT, capture_output=True, text=True)
        if check and p.returncode != 0:
            raise AssertionError(f"tessera {' '.join(args)} failed:\n{p.stderr}")
        return p

    return run


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port, timeout):
    end = time.time() + timeout
    while time.time() < end:
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def _session_pids(sid):
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid:  # field 6 of stat: the session id
                pids.append(int(d))
        except (OSError, IndexError, ValueError):
            pass
    return pids


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory):
    """`ray start --head` and one more worker node on loopback (`--block`, each in a session of
    its own, so teardown ends exactly the processes it started), then `ray.init(address=...)`."""
    ray = pytest.importorskip("ray")
    ray_bin = shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray")
    assert ray_bin, "the `ray` command is not installed"
    port = _free_port()
    # Loopback only: no token authentication (Ray turns it on when ~/.ray/auth_token exists, and
    # the nodes and the driver would then depend on that file).
    auth = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    saved = {k: os.environ.get(k) for k in auth}
    os.environ.update(auth)
    env = dict(os.environ)
    tmp = tmp_path_factory.mktemp("ray")
    common = ["--num-cpus=1", "--disable-usage-stats", "--node-ip-address=127.0.0.1", "--block"]
    procs = []
    logs = []

    def start(args, name):
        log = open(tmp / f"{name}.log", "w")
        logs.append(log)
        procs.append(
            subprocess.Popen(
                [ray_bin, "start", *args, *common],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    try:
        start(
            [
                "--head",
                f"--port={port}",
                "--include-dashboard=false",
                f"--temp-dir={tmp / 'session'}",
            ],
            "head",
        )
        _wait_port(port, 60)
        start([f"--address=127.0.0.1:{port}"], "worker")
        ray.init(address=f"127.0.0.1:{port}", log_to_driver=False)
        end = time.time() + 60
        while len([n for n in ray.nodes() if n["Alive"]]) < 2:
            if time.time() > end:
                raise TimeoutError("the worker node did not join")
            time.sleep(0.5)
        yield ray
    finally:
        try:
            ray.shutdown()
        finally:
            for p in reversed(procs):
                sid = p.pid  # a new session's id is its leader's pid
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
                    try:
                        p.wait(20)
                    except subprocess.TimeoutExpired:
                        p.kill()
                for pid in _session_pids(sid):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            for log in logs:
                log.close()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
