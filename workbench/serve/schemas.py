"""Request bodies of the OpenAI API (the fields workbench serves) and its error format.

Errors are ``{"error": {"message", "type", "param", "code"}}`` with a 4xx status, as OpenAI
answers them; fields the server does not know are ignored, fields it cannot honour (``n > 1``,
``logprobs``) are refused.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class ApiError(Exception):
    """An error answered as OpenAI does: HTTP ``status`` and an ``error`` object."""

    def __init__(self, status: int, message: str, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None):  # fmt: skip
        super().__init__(message)
        self.status, self.message, self.type = status, message, type
        self.param, self.code, self.headers = param, code, headers

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}  # fmt: skip


class StreamOptions(BaseModel):
    include_usage: bool = False


class _Common(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str
    max_tokens: int | None = Field(None, ge=1)
    temperature: float = Field(1.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    frequency_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    presence_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = 1
    logprobs: Any = None

    @field_validator("stop")
    @classmethod
    def _stops(cls, v):
        stops = [v] if isinstance(v, str) else list(v or [])
        if len(stops) > 4:
            raise ValueError(f"at most 4 stop sequences, found {len(stops)}")
        return stops

    @field_validator("n")
    @classmethod
    def _one(cls, v):
        if v != 1:
            raise ValueError(f"only n=1 is supported, found {v}")
        return v

    @field_validator("logprobs")
    @classmethod
    def _no_logprobs(cls, v):
        if v not in (None, False, 0):
            raise ValueError("logprobs are not supported")
        return v


class CompletionRequest(_Common):
    prompt: str | list[str] | list[int] | list[list[int]]
    max_tokens: int | None = Field(16, ge=1)  # OpenAI's default for /v1/completions
    echo: bool = False

    @field_validator("prompt")
    @classmethod
    def _single(cls, v):
        if isinstance(v, list) and v and isinstance(v[0], (str, list)):
            if len(v) != 1:
                raise ValueError(f"one prompt per request is supported, found {len(v)}")
            v = v[0]
        if isinstance(v, list) and not v:
            raise ValueError("the prompt has no tokens")
        return v


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):  # content parts: keep the text ones
            return "".join(p.get("text", "") for p in self.content if p.get("type") == "text")
        return self.content or ""


class ChatRequest(_Common):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)


def parse(model: type[BaseModel], data: Any) -> Any:
    """Validate a decoded JSON body, or raise a 400 naming the first bad field."""
    if not isinstance(data, dict):
        raise ApiError(400, f"the request body must be a JSON object, found {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        param = ".".join(str(p) for p in err["loc"]) or None
        raise ApiError(400, f"{param}: {err['msg']}" if param else err["msg"],
                       param=param) from None  # fmt: skip
