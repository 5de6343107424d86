"""The dataset-import copier, for real: a loopback HTTP server as the source, the copier as
the Job runs it (its own process), killed mid-copy and run again."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import ROOT

from trainer.dataset_import import CHECKSUMS, MARKER, PARTIAL

IMPORT = [sys.executable, "-m", "trainer.dataset_import"]


class Source:
    """A directory served over HTTP on 127.0.0.1 that counts requests per file and can hold
    one file half-sent until released."""

    def __init__(self, root: Path):
        self.root = root
        self.requests: Counter[str] = Counter()
        self.hold: str | None = None
        self.holding = threading.Event()
        self.release = threading.Event()
        source = self

        class Handler(SimpleHTTPRequestHandler):
            def do_GET(self) -> None:
                name = self.path.lstrip("/")
                source.requests[name] += 1
                if name != source.hold:
                    return super().do_GET()
                body = (source.root / name).read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                source.holding.set()
                source.release.wait(60)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(root)))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def dataset(root: Path, files: dict[str, bytes]) -> dict[str, bytes]:
    """Write ``files`` and their SHA256SUMS under ``root``."""
    for name, body in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(body)
    sums = "".join(f"{hashlib.sha256(body).hexdigest()}  {name}\n" for name, body in files.items())
    (root / CHECKSUMS).write_text(sums)
    return files


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Source]:
    (tmp_path / "src").mkdir()
    source = Source(tmp_path / "src")
    yield source
    source.close()


FILES = {"a.bin": os.urandom(300_000), "sub/b.bin": os.urandom(200_000), "c.bin": os.urandom(500_000)}


def import_(source: str, dest: Path, name: str = "corpus") -> subprocess.CompletedProcess:
    cmd = [*IMPORT, "--name", name, "--source", source, "--dest", str(dest)]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_an_interrupted_import_resumes_without_copying_what_is_done(tmp_path: Path, served: Source) -> None:
    files = dataset(served.root, FILES)
    served.hold = "c.bin"
    dest = tmp_path / "data"
    dest.mkdir()
    cmd = [*IMPORT, "--name", "corpus", "--source", served.url, "--dest", str(dest)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert served.holding.wait(60), "the copier never reached the third file"
        # The server has sent half of c.bin; the copier opens its .part only once the response
        # reaches it, which on a loaded machine can come after the server's signal.
        part = dest / "corpus" / PARTIAL / "c.bin.part"
        deadline = time.monotonic() + 60
        while not part.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        log, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert "[1/3] a.bin: copied 300000 bytes, sha256 verified" in log
    assert "[2/3] sub/b.bin: copied 200000 bytes" in log
    corpus = dest / "corpus"
    # Killed inside c.bin: what is done is in place, the half file only under .import.
    assert (corpus / "a.bin").read_bytes() == files["a.bin"] and not (corpus / "c.bin").exists()
    assert (corpus / PARTIAL / "c.bin.part").exists()
    assert json.loads((corpus / MARKER).read_text())["complete"] is False

    served.hold = None
    resumed = import_(served.url, dest)
    assert resumed.returncode == 0, resumed.stderr
    assert "[1/3] a.bin: already complete (300000 bytes)" in resumed.stdout
    assert "[2/3] sub/b.bin: already complete (200000 bytes)" in resumed.stdout
    assert "[3/3] c.bin: copied 500000 bytes, sha256 verified" in resumed.stdout
    assert served.requests == Counter({CHECKSUMS: 2, "a.bin": 1, "sub/b.bin": 1, "c.bin": 2})
    assert all((corpus / name).read_bytes() == body for name, body in files.items())
    assert not (corpus / PARTIAL).exists() and json.loads((corpus / MARKER).read_text())["complete"] is True


def test_a_corrupt_file_is_caught_by_its_checksum_and_never_put_in_place(tmp_path: Path, served: Source) -> None:
    files = dataset(served.root, FILES)
    flipped = bytearray(files["sub/b.bin"])
    flipped[1000] ^= 0xFF
    (served.root / "sub" / "b.bin").write_bytes(bytes(flipped))
    result = import_(served.url, tmp_path)
    assert result.returncode == 1
    error = result.stderr.strip().splitlines()[-1]
    expected = hashlib.sha256(files["sub/b.bin"]).hexdigest()
    assert (
        error.startswith("error: [2/3] sub/b.bin: sha256 ") and f"is not the {expected} that SHA256SUMS lists" in error
    )
    assert not (tmp_path / "corpus" / "sub" / "b.bin").exists()
    assert not (tmp_path / "corpus" / PARTIAL / "sub" / "b.bin.part").exists()
    # The source repaired, the Job's retry copies what is missing.
    (served.root / "sub" / "b.bin").write_bytes(files["sub/b.bin"])
    retried = import_(served.url, tmp_path)
    assert retried.returncode == 0, retried.stderr
    assert "[1/3] a.bin: already complete" in retried.stdout and served.requests["a.bin"] == 1


def test_another_dataset_under_the_same_name_is_refused(tmp_path: Path, served: Source) -> None:
    dataset(served.root, {"x.txt": b"first"})
    assert import_(served.url, tmp_path / "data").returncode == 0
    other = tmp_path / "other"
    other.mkdir()
    dataset(other, {"x.txt": b"second"})
    result = import_(str(other), tmp_path / "data")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: {tmp_path / 'data' / 'corpus'} holds another dataset (from {served.url}, SHA256SUMS sha256 "
        f"{hashlib.sha256((served.root / CHECKSUMS).read_bytes()).hexdigest()}): import under another --name, "
        "or delete it first"
    )
    assert (tmp_path / "data" / "corpus" / "x.txt").read_bytes() == b"first"
    # The same dataset from a mounted directory (the OSS path) is an import of its own name.
    assert import_(str(other), tmp_path / "data", name="second").returncode == 0
    assert (tmp_path / "data" / "second" / "x.txt").read_bytes() == b"second"


@pytest.mark.parametrize(
    ("sums", "message"),
    [
        ("0" * 64 + "  ../etc/passwd\n", "'../etc/passwd' is not a path inside the dataset"),
        ("abc  x.txt\n", "line 1: expected '<sha256>  <path>'"),
    ],
)
def test_a_checksum_list_that_leaves_the_dataset_is_refused(tmp_path: Path, sums: str, message: str) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / CHECKSUMS).write_text(sums)
    result = import_(str(tmp_path / "src"), tmp_path / "data")
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr
