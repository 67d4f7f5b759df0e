"""One OpenAI-compatible chat-completions endpoint, through the ``openai`` client: a system and a user message in,
the reply's text out, with retries and backoff on 429, 5xx, timeouts and dropped connections. The ``llm`` proposer
asks it for candidates, and extraction for the inputs it cannot infer."""

from __future__ import annotations

import os
import time
from typing import Callable

from smithbot.config import ConfigError, LLMConfig


class LLMClient:
    """The endpoint an ``llm:`` config section names, with the key read from the variable it names (never stored in
    a file). No section, or a missing key variable, is a ``ConfigError``."""

    def __init__(self, llm: LLMConfig | None, sleep: Callable[[float], None] = time.sleep) -> None:
        import openai  # (an optional dependency: only a run that asks an endpoint needs it)

        if llm is None:
            raise ConfigError("an LLM needs an `llm:` section in the --config file (base_url, api_key_env, models)")
        key = os.environ.get(llm.api_key_env)
        if not key:
            raise ConfigError(f"the API key variable {llm.api_key_env} is not set (named by llm.api_key_env)")
        self.llm = llm
        self.openai = openai
        self.client = openai.OpenAI(base_url=llm.base_url, api_key=key, timeout=llm.timeout_s, max_retries=0)
        self.sleep = sleep

    def ask(self, model: str, system: str, user: str) -> tuple[str, str, int, int]:
        """(text, finish_reason, prompt tokens, completion tokens); raises RuntimeError with a one-line reason."""
        o = self.openai
        last = ""
        for attempt in range(self.llm.retries + 1):
            try:
                r = self.client.chat.completions.create(
                    model=model, temperature=self.llm.temperature, max_tokens=self.llm.max_tokens,
                    messages=[{"role": "system", "content": system}, {"role": "user", "content": user}])
            except (o.RateLimitError, o.APITimeoutError, o.APIConnectionError, o.InternalServerError) as exc:
                last = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                if attempt < self.llm.retries:
                    self.sleep(self.llm.backoff_s * 2 ** attempt)
                continue
            except o.APIStatusError as exc:
                raise RuntimeError(f"the endpoint refused the request: HTTP {exc.status_code}: "
                                   f"{str(exc).splitlines()[0][:200]}") from None
            except (o.APIError, ValueError, KeyError, TypeError) as exc:
                raise RuntimeError(f"garbage from the endpoint: {type(exc).__name__}: {str(exc)[:200]}") from None
            if not getattr(r, "choices", None):
                raise RuntimeError("garbage from the endpoint: a response without choices")
            choice = r.choices[0]
            usage = getattr(r, "usage", None)
            return (choice.message.content or "", choice.finish_reason or "",
                    int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0))
        raise RuntimeError(f"the endpoint failed {self.llm.retries + 1} times: {last}")
