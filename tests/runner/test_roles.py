"""Role specs: the timeout, deadline and Retry-After cap reach the model and the manifest;
no secret reaches a manifest, a cache key or an error (a base URL with credentials and a
pasted key are refused without being repeated; a named variable that is unset is an error
naming it); a key is sent only where the user named one. Against the loopback server."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dialogbench.data.registry import load_dataset
from dialogbench.models import Model, ModelSpec
from dialogbench.models.cache import CallKey, ResponseCache
from dialogbench.models.openai_compat import OpenAICompatible
from dialogbench.models.spec import make_provider
from dialogbench.runner import RoleSpec, run_track
from dialogbench.runner.rescore import rescore
from dialogbench.runner.roles import settings_of
from dialogbench.testing.chatserver import ChatServer
from golden.cases import golden_reply

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from examples.echo_track import ECHO, EchoConfig  # noqa: E402

SECRET = "hunter2-Zq81"
UNSET = "DIALOGBENCH_TEST_SURELY_UNSET"


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatServer]:
    monkeypatch.setenv("DIALOGBENCH_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.delenv(UNSET, raising=False)
    with ChatServer(reply=golden_reply) as srv:
        yield srv


def test_defaults_and_settings_record_the_timing() -> None:
    spec = RoleSpec("openai-compatible/m", "http://127.0.0.1:1/v1")
    assert (spec.timeout_s, spec.deadline_s, spec.retry_after_max_s) == (30.0, 300.0, 60.0)
    parsed = ModelSpec.parse("openai/gpt-4o")
    assert (parsed.timeout_s, parsed.deadline_s, parsed.retry_after_max_s) == (30.0, 300.0, 60.0)
    tuned = RoleSpec("openai-compatible/m", "http://127.0.0.1:1/v1", None, 4, 12.5, 99.0, 5.0)
    assert tuned.settings() == {
        "model": "openai-compatible/m",
        "base_url": "http://127.0.0.1:1/v1",
        "api_key_env": None,
        "timeout_s": 12.5,
        "deadline_s": 99.0,
        "retry_after_max_s": 5.0,
        "max_connections": 4,
    }


def test_from_spec_hands_the_model_the_specs_timing() -> None:
    spec = ModelSpec.parse(
        "openai-compatible/m",
        base_url="http://127.0.0.1:1/v1",
        timeout_s=7.0,
        deadline_s=70.0,
        retry_after_max_s=3.0,
    )
    model = Model.from_spec(spec, cache=None)
    assert (model.timeout_s, model.deadline_s, model.retry_after_max_s) == (7.0, 70.0, 3.0)
    assert Model.from_spec(spec, cache=None, timeout_s=1.0).timeout_s == 1.0  # a kwarg wins
    asyncio.run(model.aclose())


@pytest.mark.parametrize(
    ("field", "value", "option"),
    [
        ("timeout_s", 0.0, "--timeout"),
        ("timeout_s", float("nan"), "--timeout"),
        ("deadline_s", -1.0, "--deadline"),
        ("deadline_s", float("inf"), "--deadline"),
        ("retry_after_max_s", -0.5, "--retry-after-max"),
    ],
)
def test_bad_timing_is_an_error_naming_the_option(field: str, value: float, option: str) -> None:
    with pytest.raises(ValueError, match=option):
        ModelSpec.parse("openai-compatible/m", base_url="http://h/v1", **{field: value})
    assert ModelSpec.parse("embedded", retry_after_max_s=0.0).retry_after_max_s == 0.0


@pytest.mark.parametrize(
    "url",
    [
        f"http://alice:{SECRET}@127.0.0.1:8000/v1",
        f"https://{SECRET}@api.example.com/v1",
        f"https://:{SECRET}@api.example.com/v1",
        f"alice:{SECRET}@host:8000/v1",  # no scheme
    ],
)
def test_a_base_url_with_credentials_is_refused_without_echo(url: str) -> None:
    with pytest.raises(ValueError) as e:
        ModelSpec.parse("openai-compatible/m", base_url=url)
    assert SECRET not in str(e.value) and "alice" not in str(e.value)
    assert "--api-key-env" in str(e.value)
    with pytest.raises(ValueError) as again:
        RoleSpec("openai-compatible/m", url).settings()  # so a manifest cannot hold it
    assert SECRET not in str(again.value)


@pytest.mark.parametrize(
    "url", [f"http://h:8000/v1?api_key={SECRET}", f"http://h/v1#{SECRET}", "ftp://h/v1", "h/v1"]
)
def test_a_base_url_with_a_query_or_no_http_scheme_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="--base-url") as e:
        ModelSpec.parse("openai-compatible/m", base_url=url)
    assert SECRET not in str(e.value)


@pytest.mark.parametrize(
    "value",
    [
        f"sk-proj-{SECRET}",
        "hf_AbCdEfGhIjKlMnOpQrSt1234",
        "sk_live_51HxYzAbCdEfGh12345678",
        "3f2a9b7c1d0e4f5a6b7c8d9e0f1a2b3c",
        "my key",
        "1ABC",
        "A" * 101,
        "",
    ],
)
def test_a_key_given_as_the_variable_name_is_refused_without_echo(value: str) -> None:
    with pytest.raises(ValueError, match="--api-key-env") as e:
        ModelSpec.parse("openai-compatible/m", base_url="http://h/v1", api_key_env=value)
    if value:
        assert value not in str(e.value)


@pytest.mark.parametrize(
    "name", ["OPENAI_API_KEY", "HF_TOKEN", "GITHUB_TOKEN", "AZURE_OPENAI_API_KEY", "my_key2", "_K"]
)
def test_plausible_variable_names_are_accepted(name: str) -> None:
    spec = ModelSpec.parse("openai-compatible/m", base_url="http://h/v1", api_key_env=name)
    assert spec.api_key_env == name


def test_an_unset_variable_is_an_error_naming_it(tmp_path: Path, server: ChatServer) -> None:
    spec = RoleSpec("openai-compatible/m", server.base_url, UNSET)
    with pytest.raises(ValueError, match=UNSET):
        spec.open()
    with pytest.raises(ValueError, match=f"{UNSET}.*not set"):
        run_track(
            ECHO, load_dataset("sample"), tmp_path / "run", EchoConfig(limit=1), {"model": spec}
        )
    assert server.request_count == 0


def test_a_key_goes_only_where_it_was_named(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", f"sk-openai-{SECRET}")
    monkeypatch.setenv("MY_KEY", f"named-{SECRET}")

    async def ask(spec: ModelSpec) -> None:
        model = Model.from_spec(spec, cache=None)
        try:
            await model.generate([{"role": "user", "content": "hi"}])
        finally:
            await model.aclose()

    asyncio.run(ask(ModelSpec.parse("openai-compatible/m", base_url=server.base_url)))
    asyncio.run(
        ask(ModelSpec.parse("openai-compatible/m", base_url=server.base_url, api_key_env="MY_KEY"))
    )
    sent = server.authorizations
    assert len(sent) == 2
    assert not any(f"sk-openai-{SECRET}" in (a or "") for a in sent)  # never the OpenAI key
    assert sent[1] == f"Bearer named-{SECRET}"
    # OpenAI's own API, by provider or by its address, reads OPENAI_API_KEY
    assert ModelSpec.parse("openai/gpt-4o").api_key() == f"sk-openai-{SECRET}"
    to_openai = ModelSpec.parse("openai-compatible/gpt-4o", base_url="https://api.openai.com/v1")
    assert to_openai.api_key() == f"sk-openai-{SECRET}"
    assert ModelSpec.parse("openai-compatible/m", base_url=server.base_url).api_key() is None


def test_openai_base_url_from_the_environment_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://u:{SECRET}@h/v1")
    with pytest.raises(ValueError, match="OPENAI_BASE_URL") as e:
        make_provider(ModelSpec.parse("openai-compatible/m"))
    assert SECRET not in str(e.value)


def test_the_manifest_records_the_timing_and_no_secret(
    tmp_path: Path, server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_KEY", f"named-{SECRET}")
    roles = {
        "model": RoleSpec("openai-compatible/m", server.base_url, "MY_KEY", 4, 12.5, 99.0, 5.0),
        "judge": RoleSpec("openai-compatible/j", server.base_url, "MY_KEY"),
    }
    out = tmp_path / "run"
    run_track(ECHO, load_dataset("sample"), out, EchoConfig(limit=2, n_boot=20), roles)
    manifest = json.loads((out / "manifest.json").read_text())
    model = manifest["roles"]["model"]
    assert (model["timeout_s"], model["deadline_s"], model["retry_after_max_s"]) == (12.5, 99, 5)
    assert manifest["roles"]["judge"]["timeout_s"] == 30.0
    for f in out.rglob("*"):
        if f.is_file():
            assert SECRET not in f.read_text(errors="replace"), f
    assert SECRET not in (tmp_path / "cache.sqlite").read_bytes().decode(errors="replace")


def test_a_given_models_endpoint_and_cache_key_hold_no_credentials(tmp_path: Path) -> None:
    url = f"http://user:{SECRET}@127.0.0.1:9/v1?token={SECRET}"
    provider = OpenAICompatible("openai-compatible/m", "m", url, None)
    model = Model(provider, cache=None)
    assert settings_of(model) == {
        "model": "openai-compatible/m",
        "endpoint": "http://127.0.0.1:9/v1",
    }
    key = CallKey(model.name, provider.endpoint, {}, [{"role": "user", "content": "hi"}])
    assert key.endpoint == "http://127.0.0.1:9/v1"
    cache = ResponseCache(tmp_path / "c.sqlite")
    assert cache.get(key) is None
    cache.close()
    assert SECRET not in (tmp_path / "c.sqlite").read_bytes().decode(errors="replace")
    asyncio.run(model.aclose())


def test_timing_is_not_part_of_a_runs_identity(
    tmp_path: Path, server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resume with a longer timeout (or other connection settings) keeps the finished
    work, and re-judging a run whose model had its own timing never asks that model."""
    monkeypatch.setenv("MY_KEY", "k")
    ds, out, config = load_dataset("sample"), tmp_path / "run", EchoConfig(limit=2, n_boot=20)
    model = RoleSpec("openai-compatible/m", server.base_url, "MY_KEY", 4, 12.5, 99.0, 5.0)
    judge = RoleSpec("openai-compatible/j", server.base_url)
    run_track(ECHO, ds, out, config, {"model": model, "judge": judge})
    longer = RoleSpec("openai-compatible/m", server.base_url, "MY_KEY", 8, 60.0, 600.0, 30.0)
    again = run_track(ECHO, ds, out, config, {"model": longer, "judge": judge})
    assert again.solved_now == 0 and again.scored_now == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["roles"]["model"]["timeout_s"] == 60.0  # the manifest says what ran last
    server.reset()
    other = RoleSpec("openai-compatible/j2", server.base_url, timeout_s=5.0)
    got = rescore(out, [other], tmp_path / "j2", lambda t, n, s: load_dataset(n))
    assert {b["model"] for b in server.requests} == {"j2"}
    assert got.runs["openai-compatible_j2"].solved_now == 0
