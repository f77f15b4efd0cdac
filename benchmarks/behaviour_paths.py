"""What :mod:`behaviour_digest` hashes in one source tree: every path's output, as ``{path: {env: [items,
digest]}}``. Run by the digest in a subprocess with ``PYTHONPATH=SRC`` (and this checkout's tests/support);
it imports only names that stay put when modules move.

Run alone: ``python benchmarks/behaviour_paths.py --seeds 8 --trainer-seeds 2 OUT.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import enum
import hashlib
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

import yaml
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
SUPPORT = ROOT / "tests" / "support"
WALL_CLOCK = frozenset({"timings"})  # record keys holding seconds measured, not behaviour
TURN_CAP = 200  # random play's turns at most (every env truncates well before)
TRAINERS = {"slime": "slime generate", "verl": "verl agent loop", "trl": "trl rollout"}  # stage: its path
#: What the slime hook fills in a Sample.
SAMPLE_FIELDS = ("tokens", "response", "response_length", "loss_mask", "rollout_log_probs", "reward")
SAMPLE_FIELDS += ("status", "metadata", "multimodal_train_inputs")
EVALS = (("sokoban", "oracle"), ("geo3k", "oracle"), ("clock", "random"))
NOTES = """Normalised: records' per-turn `timings` and verl's `metrics` (wall clock) left out; the temp
folder's path written as <tmp> in CLI stdout and files; eval's results.jsonl hashed with its lines sorted
(episodes are written as they finish, 8 at a time). `make-sft zoom_search --format trl` is refused by the
CLI (TRL's collator puts no image in a tool message): that cell digests its exit code and message."""
#: Runs CLI commands through ``vlm_envs.cli.main``: argvs in, [exit code, stdout, own stderr lines] out.
CLI_BATCH = """import contextlib, io, json, sys
from vlm_envs.cli import main
out = []
for argv in json.loads(sys.argv[1]):
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(argv)
    own = [line for line in stderr.getvalue().splitlines() if line.startswith("vlm-envs")]
    out.append([code, stdout.getvalue(), own])
print(json.dumps(out))
"""


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canon(value: Any) -> Any:
    """``value`` as JSON data: images, tensors and arrays as dtype, shape and their bytes' SHA-256; enums
    by value; models and dataclasses by their fields; wall-clock keys left out."""
    if isinstance(value, dict):
        return {str(k): canon(v) for k, v in value.items() if k not in WALL_CLOCK}
    if isinstance(value, list | tuple):
        return [canon(v) for v in value]
    if value is None or isinstance(value, str | int | float):
        return value
    if isinstance(value, enum.Enum):
        return canon(value.value)
    if isinstance(value, bytes):
        return ["bytes", sha(value)]
    if isinstance(value, Image.Image):
        return ["image", value.mode, list(value.size), sha(value.tobytes())]
    if hasattr(value, "detach"):  # a torch tensor, any dtype, as its raw bytes
        flat = value.detach().cpu().contiguous().flatten()
        return ["tensor", str(value.dtype), list(value.shape), sha(flat.view(-1).numpy().tobytes())]
    if hasattr(value, "dtype") and hasattr(value, "tobytes"):  # a numpy array or scalar
        return ["array", str(value.dtype), list(getattr(value, "shape", ())), sha(value.tobytes())]
    if hasattr(value, "model_dump"):
        return canon(value.model_dump())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return canon({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    raise TypeError(f"no canonical form for {type(value).__name__}")


@dataclasses.dataclass
class Tally:
    """One (path, env) cell: items counted, their canonical JSON hashed in order; trainer episodes won."""

    items: int = 0
    won: int = 0
    hasher: Any = dataclasses.field(default_factory=hashlib.sha256)

    def add(self, value: Any, count: int = 1, won: bool = False) -> None:
        self.hasher.update(json.dumps(canon(value), sort_keys=True).encode() + b"\n")
        self.items, self.won = self.items + count, self.won + won


Tallies = dict[str, dict[str, Tally]]


def oracle_replies(name: str, seed: int | None, sample: Any = None, **config: Any) -> list[str]:
    """The oracle's reply at every turn of the episode, until it ends."""
    from vlm_envs import build_env

    env = build_env(name, sample=sample, **config)
    env.reset(seed=seed)
    replies, done = [], False
    while not done:
        replies.append(env.oracle_response())
        done = env.step(replies[-1])[1]
    env.close()
    return replies


def play(tallies: Tallies, names: list[str], seeds: int) -> None:
    """Oracle and random play of every env, difficulty and seed."""
    from vlm_envs import build_env

    cases = [(n, d, p) for n in names for d in ("easy", "medium", "hard") for p in ("oracle", "random")]
    for name, difficulty, policy in cases:
        for seed in range(seeds):
            env, rng, oracle = build_env(name, difficulty=difficulty), random.Random(seed), policy == "oracle"
            obs, info = env.reset(seed=seed)
            trace: list[Any] = [env.system_prompt(), env.tools(), obs, info, env.format_observation(obs)]
            for _ in range(TURN_CAP):
                reply = env.oracle_response() if oracle else env.random_response(rng)
                rationale = env.oracle_rationale() if oracle else None
                obs, done, step = env.step(reply)
                trace += [[reply, rationale, done], obs, step, env.format_observation(obs)]
                if done:
                    break
            tallies[f"play {policy} {difficulty}"][name].add([trace, env.episode_reward()])
            env.close()


def rows(folder: Path, trainer: str, name: str) -> list[dict[str, Any]]:
    """The rows ``make-dataset NAME --trainer TRAINER`` wrote in the CLI stage."""
    import pyarrow.parquet as pq

    return pq.read_table(folder / trainer / f"{name}.parquet").to_pylist()


class Replies:
    """An engine sending a queue of texts as token ids, in order, with fixed log probs."""

    def __init__(self, codec: Any) -> None:
        self.codec, self.queue = codec, deque[list[int]]()

    def load(self, texts: list[str]) -> None:
        self.queue = deque([*self.codec.tokenize(t), self.codec.end_of_turn_id] for t in texts)

    async def generate(self, input_ids: Any, images: Any, sampling_params: Any) -> Any:
        from vlm_envs.rollout import EngineOutput

        ids = self.queue.popleft() if self.queue else [self.codec.end_of_turn_id]
        log_probs = [-0.25 - 0.5 * (i % 3) for i in range(len(ids))]
        return EngineOutput(token_ids=ids, log_probs=log_probs, finish_reason="stop")


def slime(cells: dict[str, Tally], names: list[str], data: Path) -> None:
    """slime's ``generate`` hook on each env's slime rows (made into Samples as slime's Dataset makes
    them), the YAML make-dataset wrote as its args, against the SGLang stand-in server."""
    from slime.rollout.sglang_rollout import GenerateState
    from slime.utils.types import Sample

    from vlm_envs.rollout import ChatCodec
    from vlm_envs.rollout import slime as hook
    from vlm_envs.testing import Fault, SGLangTestServer, build_test_engine

    engine = build_test_engine("qwen2_vl", seed=0)
    codec = ChatCodec(engine.processor)

    async def one(args: Any, sample: Any) -> Any:
        try:
            return await hook.generate(args, sample, {"temperature": 1.0, "max_new_tokens": 4096})
        finally:
            await hook.close()

    with SGLangTestServer(engine) as server:
        host, port = server.url.removeprefix("http://").split(":")
        for name in names:
            args = argparse.Namespace(
                sglang_router_ip=host, sglang_router_port=int(port), rollout_temperature=1.0,
                rollout_max_response_len=4096, rollout_max_context_len=None, hf_checkpoint="(stand-in)",
                vlm_envs_check_template=True, **yaml.safe_load((data / "slime" / f"{name}.yaml").read_text()),
            )  # fmt: skip
            for index, row in enumerate(rows(data, "slime", name)):
                images = [Image.open(io.BytesIO(im["bytes"])).convert("RGB") for im in row["images"] or []]
                parts = [*({"type": "image", "image": im} for im in images)]
                parts.append({"type": "text", "text": row["problem"]})
                sample = Sample(
                    index=index,
                    prompt=codec.render([{"role": "user", "content": parts}], add_generation_prompt=True),
                    label=row["answer"],
                    multimodal_inputs={"images": images, "videos": None},
                    metadata={k: v for k, v in row["metadata"].items() if v is not None},
                )
                seed = sample.metadata.get("seed")
                task = sample if seed is None else None  # a row without a seed is its own task
                server.clear_faults()
                for text in oracle_replies(name, seed, task, **sample.metadata.get("env_config", {})):
                    server.inject(Fault("tokens", token_ids=(*codec.tokenize(text), codec.end_of_turn_id)))
                GenerateState.forget()
                out = asyncio.run(one(args, sample))
                kept = [getattr(out, field) for field in SAMPLE_FIELDS]
                cells[name].add(kept, won=out.status.value == "completed" and out.reward == 1)


def verl(cells: dict[str, Tally], names: list[str], data: Path) -> None:
    """verl's agent loop (``VlmEnvsAgentLoop.run``) on each env's verl rows, a scripted server manager."""
    from verl.experimental.agent_loop import agent_loop
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.workers.rollout.replica import TokenOutput
    from verl_support import SAMPLING, no_rollout_trace, verl_config

    from vlm_envs.rollout import ChatCodec
    from vlm_envs.rollout.verl import VlmEnvsAgentLoop
    from vlm_envs.testing import build_tiny_processor

    processor = build_tiny_processor("qwen2_vl")
    replies = Replies(ChatCodec(processor))

    class Server:
        async def generate(self, request_id: str, *, prompt_ids: Any, sampling_params: Any, **kw: Any) -> Any:
            out = await replies.generate(prompt_ids, kw.get("image_data"), sampling_params)
            return TokenOutput(token_ids=out.token_ids, log_probs=out.log_probs, stop_reason="completed")

    agent_loop.rollout_trace_attr = no_rollout_trace
    config = DictConfigWrap(verl_config(["data.max_prompt_length=2048", "data.max_response_length=4096"]))
    loop = VlmEnvsAgentLoop(
        trainer_config=config, server_manager=Server(), tokenizer=processor.tokenizer, processor=processor
    )
    for name in names:
        for row in rows(data, "verl", name):
            info = row["extra_info"]
            replies.load(oracle_replies(name, info.get("seed"), **(info.get("env_config") or {})))
            out = asyncio.run(loop.run({**SAMPLING, "logprobs": True}, extra_info=info, raw_prompt=[]))
            dumps = [o.model_dump() for o in (out if isinstance(out, list) else [out])]
            kept = [{k: v for k, v in d.items() if k != "metrics"} for d in dumps]
            cells[name].add(kept, won=dumps[-1]["reward_score"] == 1)


def trl(cells: dict[str, Tally], names: list[str], data: Path) -> None:
    """TRL's rollout function (``VlmEnvsRollout``) on each env's trl rows, its engine scripted; what it
    returns and the images it hands the trainer."""
    from vlm_envs.rollout import ChatCodec
    from vlm_envs.rollout.trl import VlmEnvsRollout
    from vlm_envs.testing import build_tiny_processor

    processor = build_tiny_processor("qwen2_vl")
    replies = Replies(ChatCodec(processor))

    class Rollout(VlmEnvsRollout):
        @contextlib.contextmanager
        def engine(self, trainer: Any, codec: Any) -> Any:
            yield replies

    taken: list[Any] = []
    args = argparse.Namespace(max_completion_length=4096, generation_kwargs={"max_new_tokens": 512})
    trainer = argparse.Namespace(processing_class=processor, args=args, take_episode_images=taken.extend)
    rollout = Rollout()
    for name in names:
        for row in rows(data, "trl", name):
            spec = json.loads(next(m["vlm_envs"] for m in row["prompt"] if m.get("vlm_envs")))
            replies.load(oracle_replies(name, spec.get("seed"), **(spec.get("env_config") or {})))
            out = rollout([row["prompt"]], trainer)
            record = out["vlm_envs"][0]
            cells[name].add([out, taken], won=record["status"] == "completed" and record["reward"] == 1)
            taken.clear()


def cli_commands(names: list[str], n: int, tmp: Path) -> list[tuple[str, str, list[str]]]:
    """(path, env, argv) of every CLI command, each writing under ``tmp``."""
    commands = []
    for t, e in ((t, e) for t in TRAINERS for e in names):
        out = f"{tmp}/{t}/{e}.parquet"
        commands.append(
            (f"cli make-dataset {t}", e, ["make-dataset", e, "-n", f"{n}", "--trainer", t, "--out", out])
        )
    for e in names:
        commands.append(("cli make-sft trl", e, ["make-sft", e, "-n", f"{n}", "--out", f"{tmp}/sft-trl/{e}"]))
    swift = ["make-sft", *names, "-n", f"{n}", "--format", "swift", "--out", f"{tmp}/sft-swift"]
    commands.append(("cli make-sft swift", "(all)", swift))
    for e, p in EVALS:
        out = f"{tmp}/eval-{e}-{p}"
        commands.append((f"cli eval {p}", e, ["eval", e, "--policy", p, "-n", "8", "--out", out, "--quiet"]))
    return commands


def normalised(file: Path, tmp: Path) -> bytes:
    """``file``'s bytes, the temp folder's path as ``<tmp>``; eval's results.jsonl in sorted lines."""
    data = file.read_bytes().replace(str(tmp).encode(), b"<tmp>")
    return b"".join(sorted(data.splitlines(keepends=True))) if file.name == "results.jsonl" else data


def cli(tallies: Tallies, names: list[str], seeds: int, tmp: Path) -> None:
    """Every CLI command in one subprocess; their exit codes, stdout and files' bytes."""
    commands = cli_commands(names, seeds, tmp)
    argv = [sys.executable, "-c", CLI_BATCH, json.dumps([argv for _, _, argv in commands])]
    done = subprocess.run(argv, cwd=tmp, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True)
    if done.returncode:
        sys.exit(f"the CLI batch failed:\n{done.stderr.decode()[-3000:]}")
    results = json.loads(done.stdout.decode().splitlines()[-1])
    seen: set[Path] = set()
    for (path, name, argv), (code, stdout, own) in zip(commands, results, strict=True):
        tallies[path][name].add([argv[0], code, stdout.replace(str(tmp), "<tmp>"), own], count=0)
        out = Path(argv[argv.index("--out") + 1])
        files = sorted(out.parent.glob(f"{out.stem}[._]*") if out.suffix else out.rglob("*"))
        for file in (f for f in files if f.is_file() and f not in seen):
            seen.add(file)
            tallies[path][name].add([str(file.relative_to(tmp)), sha(normalised(file, tmp))])


def digest_tree(args: argparse.Namespace) -> None:
    """Digest every path of the tree on ``sys.path``; write ``{path: {env: [items, digest]}}``."""
    import torch

    from vlm_envs import list_envs

    torch.set_num_threads(1)
    tallies: Tallies = defaultdict(lambda: defaultdict(Tally))
    names, seconds = [spec.name for spec in list_envs()], {}
    with tempfile.TemporaryDirectory(prefix="behaviour-digest-") as tmp:
        stages = {
            "cli": lambda: cli(tallies, names, args.trainer_seeds, Path(tmp)),
            "play": lambda: play(tallies, names, args.seeds),
            **{
                t: lambda t=t, run=run: run(tallies[TRAINERS[t]], names, Path(tmp))
                for t, run in (("slime", slime), ("verl", verl), ("trl", trl))
            },
        }
        for stage, run in stages.items():
            started = time.perf_counter()
            run()
            seconds[stage] = round(time.perf_counter() - started, 1)
    digests = {p: {e: [t.items, t.hasher.hexdigest()] for e, t in row.items()} for p, row in tallies.items()}
    won = {p: sum(t.won for t in tallies[p].values()) for p in TRAINERS.values()}
    Path(args.out).write_text(json.dumps({"digests": digests, "seconds": seconds, "won": won}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8, help="seeds per env, difficulty and policy of play")
    parser.add_argument("--trainer-seeds", type=int, default=2, help="make-dataset rows per env and trainer")
    parser.add_argument("out", help="where the digests go (JSON)")
    digest_tree(parser.parse_args())
