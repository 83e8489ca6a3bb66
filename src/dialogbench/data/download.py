"""Download public datasets from their home, checking each file's pinned sha256."""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from dialogbench.data.io import sha256_file
from dialogbench.data.registry import DatasetSpec, data_home

Report = Callable[[str, int, int | None], None]


class DownloadError(RuntimeError):
    """A download that could not be completed, with what to do instead."""


def download(
    spec: DatasetSpec, dest: Path | None = None, report: Report | None = None, timeout: float = 30.0
) -> Path:
    """Fetch every file of `spec` into `dest/<folder>` (default: the data home)."""
    if not spec.files:
        raise DownloadError(f"{spec.name} cannot be downloaded automatically: {spec.manual}")
    folder = (dest or data_home()) / spec.folder
    folder.mkdir(parents=True, exist_ok=True)
    for f in spec.files:
        target = folder / f.filename
        if target.exists() and sha256_file(target) == f.sha256:
            continue
        tmp = target.with_suffix(target.suffix + ".part")
        digest = hashlib.sha256()
        try:
            with urllib.request.urlopen(f.url, timeout=timeout) as resp, tmp.open("wb") as out:
                total = int(resp.headers.get("Content-Length") or 0) or None
                done = 0
                while chunk := resp.read(1 << 16):
                    out.write(chunk)
                    digest.update(chunk)
                    done += len(chunk)
                    if report:
                        report(f.filename, done, total)
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            tmp.unlink(missing_ok=True)
            raise DownloadError(
                f"could not fetch {f.url} ({getattr(e, 'reason', e)}). If this machine is "
                f"offline, fetch the file elsewhere, check its sha256 is {f.sha256}, and put "
                f"it at {target} (or set DIALOGBENCH_DATA to a folder holding {spec.folder}/)"
            ) from None
        if digest.hexdigest() != f.sha256:
            tmp.unlink(missing_ok=True)
            raise DownloadError(
                f"{f.url} has sha256 {digest.hexdigest()}, expected {f.sha256}: the upstream "
                "file changed or the transfer was corrupted; nothing was kept"
            )
        os.replace(tmp, target)
    return folder
