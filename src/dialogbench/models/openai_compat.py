"""Any OpenAI-compatible chat-completions server (vLLM, Ollama, llama.cpp, SGLang, hosted APIs).

Structured output is asked for in the strongest form the server accepts: JSON-schema mode,
then JSON-object mode, then the prompt alone. The first refusal (HTTP 400 naming
`response_format`) steps down once and is remembered for the endpoint.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

import openai

from dialogbench.models.transport import AiohttpTransport
from dialogbench.models.types import ChatMessage, GenerateConfig, ModelError, ModelOutput, Usage

JsonMode = Literal["json_schema", "json_object", "none"]
_RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class OpenAICompatible:
    """A chat-completions endpoint reached with the `openai` SDK (its own retries off)."""

    def __init__(
        self,
        name: str,
        model: str,
        base_url: str,
        api_key: str | None,
        timeout_s: float = 120.0,
    ) -> None:
        self.name = name
        self.model = model
        self.endpoint = base_url.rstrip("/")
        self.json_mode: JsonMode = "json_schema"
        self._secret = api_key or ""
        self._client = openai.AsyncOpenAI(
            base_url=self.endpoint,
            api_key=api_key or "not-needed",
            max_retries=0,
            timeout=timeout_s,
            http_client=openai.DefaultAsyncHttpxClient(transport=AiohttpTransport()),
        )

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAICompatible({self.name!r}, endpoint={self.endpoint!r})"

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        try:
            return await self._generate(messages, config)
        except ModelError as e:
            if self._secret and self._secret in str(e):  # a server that echoes the key
                raise ModelError(
                    str(e).replace(self._secret, "***"),
                    retryable=e.retryable,
                    status=e.status,
                    retry_after=e.retry_after,
                ) from None
            raise

    async def _generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        while True:
            request = self._request(messages, config)
            started = time.perf_counter()
            try:
                # the SDK's generic POST: its auth, pool, timeouts and typed errors, without
                # the per-call cost of typed request/response models (~1 ms of CPU a call)
                body = await self._client.post(
                    "/chat/completions",
                    cast_to=str,
                    content=json.dumps(request).encode(),
                    options={"headers": {"Content-Type": "application/json"}},
                )
                resp = json.loads(body)
            except openai.BadRequestError as e:
                if "response_format" in request and self._step_down(e):
                    continue
                raise ModelError(
                    f"{self.name}: request rejected: {_detail(e)}", retryable=False, status=400
                ) from None
            except openai.APIStatusError as e:
                raise _status_error(self.name, e) from None
            except (openai.APIConnectionError, openai.APITimeoutError) as e:
                raise ModelError(f"{self.name}: {type(e).__name__}: {e}", retryable=True) from None
            except (openai.APIResponseValidationError, ValueError, TypeError) as e:
                raise ModelError(f"{self.name}: unreadable response: {e}", retryable=True) from None
            return _output(self.name, resp, time.perf_counter() - started)

    def _request(self, messages: list[ChatMessage], config: GenerateConfig) -> dict[str, Any]:
        req: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": config.temperature,
            "max_tokens": config.max_tokens,
        }
        if config.top_p is not None:
            req["top_p"] = config.top_p
        if config.seed is not None:
            req["seed"] = config.seed
        if config.stop:
            req["stop"] = list(config.stop)
        if config.json_schema is not None and self.json_mode == "json_schema":
            req["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": config.schema_name, "schema": config.json_schema},
            }
        elif config.json_schema is not None and self.json_mode == "json_object":
            req["response_format"] = {"type": "json_object"}
        req.update(config.extra)
        return req

    def _step_down(self, e: openai.BadRequestError) -> bool:
        text = _detail(e).lower()
        if "response_format" not in text and "json_schema" not in text:
            return False
        self.json_mode = "json_object" if self.json_mode == "json_schema" else "none"
        return True

    async def aclose(self) -> None:
        await self._client.close()


def _detail(e: openai.APIStatusError) -> str:
    try:
        body = e.response.text
    except Exception:  # the body may already be gone
        body = ""
    return (body or str(e))[:500]


def _status_error(name: str, e: openai.APIStatusError) -> ModelError:
    status = e.status_code
    retry_after: float | None = None
    raw = e.response.headers.get("retry-after") if e.response is not None else None
    if raw:
        try:
            retry_after = max(0.0, float(raw))
        except ValueError:
            retry_after = None
    return ModelError(
        f"{name}: HTTP {status}: {_detail(e)}",
        retryable=status in _RETRYABLE_STATUS,
        status=status,
        retry_after=retry_after,
    )


def _output(name: str, resp: Any, latency: float) -> ModelOutput:
    choices = resp.get("choices") if isinstance(resp, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise ModelError(f"{name}: response has no choices", retryable=True)
    message = choices[0].get("message") or {}
    usage = resp.get("usage") or {}
    return ModelOutput(
        text=message.get("content") or "",
        usage=Usage(
            prompt_tokens=usage.get("prompt_tokens") or 0,
            completion_tokens=usage.get("completion_tokens") or 0,
        ),
        model=resp.get("model") or "",
        finish_reason=choices[0].get("finish_reason"),
        latency_s=latency,
    )
