"""Downloads over real HTTP on loopback: verified, rejected on a bad digest, clear offline."""

from __future__ import annotations

import hashlib
import http.server
import socket
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from dialogbench.data.download import DownloadError, download
from dialogbench.data.registry import REGISTRY, RemoteFile

PAYLOAD = b'[{"sample_id": "c1"}]\n' * 1000


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    root = tmp_path / "www"
    root.mkdir()
    (root / "file.json").write_bytes(PAYLOAD)

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _spec(url: str, digest: str) -> object:
    return replace(REGISTRY["locomo"], files=(RemoteFile("locomo10.json", url, digest),))


def test_download_verifies_digest(server: str, tmp_path: Path) -> None:
    spec = _spec(f"{server}/file.json", hashlib.sha256(PAYLOAD).hexdigest())
    seen: list[int] = []
    folder = download(spec, tmp_path / "home", report=lambda f, done, total: seen.append(done))  # type: ignore[arg-type]
    assert (folder / "locomo10.json").read_bytes() == PAYLOAD
    assert seen[-1] == len(PAYLOAD)
    # a second call finds the verified file and fetches nothing
    download(spec, tmp_path / "home", report=lambda *a: pytest.fail("fetched again"))  # type: ignore[arg-type]


def test_digest_mismatch_keeps_nothing(server: str, tmp_path: Path) -> None:
    spec = _spec(f"{server}/file.json", "0" * 64)
    with pytest.raises(DownloadError, match="expected 0000"):
        download(spec, tmp_path / "home")  # type: ignore[arg-type]
    assert not list((tmp_path / "home" / "locomo").iterdir())


def test_unreachable_host_says_what_to_do(tmp_path: Path) -> None:
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spec = _spec(f"http://127.0.0.1:{port}/file.json", "0" * 64)
    with pytest.raises(DownloadError, match="If this machine is offline") as info:
        download(spec, tmp_path / "home", timeout=2)  # type: ignore[arg-type]
    assert "DIALOGBENCH_DATA" in str(info.value)


def test_manual_dataset_explains() -> None:
    with pytest.raises(DownloadError, match="cannot be downloaded automatically"):
        download(REGISTRY["longmemeval"])
