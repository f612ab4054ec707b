"""A Ray cluster of two "nodes" on this machine: ``ray start --head`` and a
second ``ray start --address`` process, each with one CPU and a resource of
its own, both on 127.0.0.1. ``eliza batch say --address`` spreads its two
actors over both (the manifest names each item's node), within a time
bound; the test stops both processes, whatever happens.

Ray gives a node the machine's network address unless it takes the machine
for a single-node one (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0), which its
``ray start --address`` then refuses to join. So the second node's ``ray
start`` runs with Ray's address probe answering 127.0.0.1: nothing here
binds beyond loopback.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from batch_util import LOOPBACK_HEX, TINY_KOKORO, TINY_VOICE, listening_addresses, ray_tmp, worker_env

pytest.importorskip("ray.data")

pytestmark = pytest.mark.slow

# `ray start` (Ray's own CLI entry point) with its network-address probe
# answering loopback.
RAY_START_LOOPBACK = (
    "import sys\n"
    "import ray._private.services as services\n"
    "services.node_ip_address_from_perspective = lambda address=None: '127.0.0.1'\n"
    "from ray.scripts.scripts import main\n"
    "sys.argv = ['ray', *sys.argv[1:]]\n"
    "sys.exit(main())\n"
)
JOB_SECONDS = 240
LINES = ["həlˈO ðˈɛɹ.", "hˌW ɑɹ jˈu?", "fˈIn."]  # noqa: RUF001


def _ray_cli() -> str:
    """The ``ray`` command of the Python running the tests."""
    beside = Path(sys.executable).with_name("ray")
    found = str(beside) if beside.exists() else shutil.which("ray")
    if found is None:
        pytest.skip("no `ray` command")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Ends a ``ray start --block`` and the node processes it started (its
    own process group)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    # Whatever of the group outlived its leader.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[str, dict[str, str], set[str]]]:
    """(address, the environment to reach it with, the two node ids)."""
    with worker_env(), ray_tmp() as tmp:
        yield from _cluster(tmp)


def _cluster(tmp: Path) -> Iterator[tuple[str, dict[str, str], set[str]]]:
    import ray

    port = _free_port()
    # A cluster of seconds on loopback, without Ray's token authentication
    # (which this driver, its ray imported before, would not pick up).
    # A stopped node drains no work: it need not wait Ray's default 30 s.
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "2"}
    common = ["--block", "--num-cpus=1", "--disable-usage-stats"]
    logs = tmp / "logs"
    logs.mkdir()
    head = subprocess.Popen(
        [_ray_cli(), "start", "--head", *common, "--node-ip-address=127.0.0.1", f"--port={port}",
         "--include-dashboard=false", f"--temp-dir={tmp}", '--resources={"head": 1}'],
        env={**env, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"},
        stdout=(logs / "head.log").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    procs = [head]
    address = f"127.0.0.1:{port}"
    try:
        _wait_for_port(port, head, logs / "head.log")
        second = subprocess.Popen(
            [sys.executable, "-c", RAY_START_LOOPBACK, "start", *common, f"--address={address}",
             '--resources={"second": 1}'],
            env={**env, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1"},
            stdout=(logs / "second.log").open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        procs.insert(0, second)
        import eliza.batch._jobs as jobs

        with jobs._loopback_only():
            ray.init(address=address, log_to_driver=False)
        try:
            deadline = time.monotonic() + 120
            while True:
                nodes = [n for n in ray.nodes() if n["Alive"]]  # type: ignore[no-untyped-call]
                if len(nodes) == 2 or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            assert len(nodes) == 2, (logs / "second.log").read_text()[-2000:]
            assert {n["NodeManagerAddress"] for n in nodes} == {"127.0.0.1"}
            # Both nodes' processes (the head's name its folder, the second
            # node's the head's address) listen on loopback only.
            ports = listening_addresses(str(tmp)) | listening_addresses(address)
            assert ports and ports <= LOOPBACK_HEX
            ids = {str(n["NodeID"]) for n in nodes}
        finally:
            ray.shutdown()
        yield address, env, ids
    finally:
        for proc in procs:  # the second node first, while its head still answers
            _stop(proc)


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"ray start --head ended: {log.read_text()[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise AssertionError(f"ray start --head did not listen on {port}: {log.read_text()[-2000:]}")


def test_the_job_spreads_over_both_nodes(
    cluster: tuple[str, dict[str, str], set[str]], tmp_path: Path
) -> None:
    address, env, node_ids = cluster
    corpus = tmp_path / "lines.txt"
    corpus.write_text("".join(f"{LINES[i % 3]}\n" for i in range(8)), encoding="utf-8")
    out = tmp_path / "out"
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "eliza", "batch", "say", str(corpus), str(out), "--address", address,
         "--model", str(TINY_KOKORO), "--voice", TINY_VOICE, "--phonemes", "--actors", "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=JOB_SECONDS,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert time.monotonic() - t0 < JOB_SECONDS
    records = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    assert len(records) == 8 and all(r["ok"] for r in records)
    assert {r["node_id"] for r in records} == node_ids
    assert "on 2 node(s)" in done.stderr
