"""Test helpers for the search: a planted task and a scripted OpenAI-compatible HTTP server on loopback."""

from __future__ import annotations

import json
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

TASKS = Path(__file__).resolve().parents[2] / "smithbot" / "tasks"

# Small interpreter cases keep an evaluation around a second on two CPU cores.
SMALL_CASES = [
    {"name": "irregular-decode-bs1-i300", "regime": "decode", "dtype": "fp32", "dims": {"tokens": 1, "intermediate": 300}},
    {"name": "irregular-decode-bs2-i200-bf16", "regime": "decode", "dtype": "bf16",
     "dims": {"tokens": 2, "intermediate": 200}},
    {"name": "irregular-prefill-3x130-fp16", "regime": "prefill", "dtype": "fp16",
     "dims": {"tokens": 3, "intermediate": 130}},
]


def planted_silu(dst: Path, block: int = 16) -> Path:
    """The bundled silu_and_mul task with a planted bad first autotune config (the one the interpreter runs):
    BLOCK=16 launches many tiny programs, so a larger BLOCK is faster under the interpreter."""
    shutil.copytree(TASKS / "silu_and_mul", dst, ignore=shutil.ignore_patterns("candidates", "__pycache__"))
    kernel = dst / "kernel.py"
    src = kernel.read_text()
    assert 'triton.Config({"BLOCK": 1024}, num_warps=4)' in src
    kernel.write_text(src.replace('triton.Config({"BLOCK": 1024}, num_warps=4)',
                                  f'triton.Config({{"BLOCK": {block}}}, num_warps=4)'))
    task = yaml.safe_load((dst / "task.yaml").read_text())
    task["cases"] = SMALL_CASES
    task["seeds"] = 3
    (dst / "task.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    return dst


class ScriptedOpenAI:
    """A loopback HTTP server speaking the chat-completions API from a script of steps, one per request:
    ``{"content": str, "usage": [in, out], "finish": "stop"}``, ``{"status": 429}``, ``{"garbage": True}`` or
    ``{"sleep": seconds, ...}`` before answering. The last step repeats once the script runs out."""

    def __init__(self, script: list[dict[str, Any]]) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                server.headers.append({k.lower(): v for k, v in self.headers.items()})
                step = server.script.pop(0) if len(server.script) > 1 else server.script[0]
                if step.get("sleep"):
                    time.sleep(step["sleep"])
                if step.get("status"):
                    self._send(step["status"], json.dumps({"error": {"message": "scripted", "type": "rate_limit"}}))
                elif step.get("garbage"):
                    self._send(200, "this is {not json")
                else:
                    t_in, t_out = step.get("usage", [100, 50])
                    self._send(200, json.dumps({
                        "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": step.get("finish", "stop"),
                                     "message": {"role": "assistant", "content": step["content"]}}],
                        "usage": {"prompt_tokens": t_in, "completion_tokens": t_out, "total_tokens": t_in + t_out}}))

            def _send(self, code: int, text: str) -> None:
                data = text.encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a scripted timeout)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ScriptedOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def llm_config(path: Path, url: str, **llm: Any) -> Path:
    cfg = {"llm": {"base_url": url, "api_key_env": "SMITHBOT_TEST_KEY", "models": [{"name": "m1", "weight": 1.0}],
                   "timeout_s": 2.0, "retries": 2, "backoff_s": 0.01, "edit_formats": {"diff": 1.0}, **llm},
           "prices": {"m1": {"input": 1000.0, "output": 2000.0}}}
    path.write_text(yaml.safe_dump(cfg))
    return path
