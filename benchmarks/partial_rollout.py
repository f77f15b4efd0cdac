"""What slime's ``--partial-rollout`` saves when the hook resumes an aborted episode instead of replaying it.

Every registered env (or those named), at its ``hard`` preset, plays one seeded episode through
``vlm_envs.rollout.slime.generate`` on the slime stand-in of tests/support (``generate_and_rm``,
``generate_and_rm_group`` and ``abort`` in slime's order), against the tiny Qwen2-VL behind the
SGLang-compatible test server, its replies the env's oracle with its rationale (``<think>...</think>``
then the answer: what a reasoning policy writes).
slime aborts the rollout inside turn ``floor(turns * --cut) + 1`` (the last at most), where the engine
returns half that reply; the ABORTED sample comes back from slime's buffer with its loss mask zeroed
(``--mask-offpolicy-in-partial-rollout``) and is handed to the hook twice, measured in the same run:

- ``restart``: its resume state removed (what the hook did before: the episode plays from turn 0);
- ``resume``: as slime hands it back (the kept turns are not sent again; the cut turn goes on from
  its partial tokens).

Per env, the table prints the turns, the cut and the size of the resume state (its JSON), then for
each: the requests sent to the engine, the tokens the engine generated and the prefill tokens it was
sent (the input ids of those requests: what it computes without a prefix cache), and what the resume
saved. Both samples are checked equal to the uninterrupted episode (tokens, log probs; the resumed
one's mask but for slime's zeros).
Run: ``PYTHONPATH=src .venv/bin/python benchmarks/partial_rollout.py [--cut 0.5] [NAME ...]``.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))  # the stand-ins

from slime.rollout.sglang_rollout import GenerateState, abort, generate_and_rm, generate_and_rm_group
from slime.utils.types import Sample

from vlm_envs import build_env, list_envs
from vlm_envs.rollout import slime as hook
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.sft.demos import oracle_reply
from vlm_envs.testing import Fault, SGLangTestServer, build_test_engine

SEED = 3
#: Each env at its ``hard`` preset: the longest episodes its oracle plays.
ENV_CONFIG = {"difficulty": "hard"}
MAX_TURNS = 40
PARAMS = {"temperature": 1.0, "max_new_tokens": 16384}


def oracle_replies(name: str) -> list[str]:
    """The oracle's replies, each with its rationale, until episode ``SEED`` of ``name`` ends."""
    env = build_env(name, **ENV_CONFIG)
    env.reset(seed=SEED)
    texts, done = [], False
    while not done and len(texts) < MAX_TURNS:
        texts.append(oracle_reply(env, rationale=True))
        done = env.step(texts[-1])[1]
    env.close()
    return texts


class Bench:
    """One env's episode: uninterrupted, then cut by slime's abort, then handed back both ways."""

    def __init__(self, server: SGLangTestServer, codec: ChatCodec, name: str, cut: float) -> None:
        self.server, self.name = server, name
        self.replies = [[*codec.tokenize(t), codec.end_of_turn_id] for t in oracle_replies(name)]
        self.cut_turn = min(len(self.replies) - 1, math.floor(len(self.replies) * cut))
        self.partial = len(self.replies[self.cut_turn]) // 2
        host, port = server.url.removeprefix("http://").split(":")
        self.args = SimpleNamespace(
            sglang_router_ip=host,
            sglang_router_port=int(port),
            rollout_temperature=1.0,
            rollout_max_response_len=PARAMS["max_new_tokens"],
            rollout_max_context_len=None,
            hf_checkpoint="(built offline by the stand-in)",
            custom_generate_function_path="vlm_envs.rollout.slime.generate",
            max_turns=MAX_TURNS,
            partial_rollout=True,
            mask_offpolicy_in_partial_rollout=True,
        )

    def sample(self) -> Sample:
        return Sample(index=0, metadata={"env": self.name, "seed": SEED, "env_config": dict(ENV_CONFIG)})

    def answer(self, replies: list[list[int]]) -> None:
        for ids in replies:
            self.server.inject(Fault("tokens", token_ids=tuple(ids)))

    async def handed_back(self, back: Sample, replies: list[list[int]]) -> tuple[Sample, dict[str, int]]:
        """``back`` through slime's ``generate_and_rm`` with the engine answering ``replies``; the
        sample and what the engine was asked for."""
        start = len(self.server.requests)
        self.answer(replies)
        out = await generate_and_rm(self.args, back, dict(PARAMS))
        sent = self.server.requests[start:]
        turns = out.metadata["vlm_envs"]["turns"]
        kept = out.metadata["vlm_envs"]["resumed"] or {"generated_tokens": 0}
        return out, {
            "requests": len(sent),
            "generated": sum(t["generated_tokens"] for t in turns) - kept["generated_tokens"],
            "prefill": sum(len(r["input_ids"]) for r in sent),
        }

    async def run(self) -> dict[str, Any]:
        self.answer(self.replies)
        ref = await generate_and_rm(self.args, self.sample(), dict(PARAMS))
        assert ref.status is Sample.Status.COMPLETED, ref.metadata["vlm_envs"]["error"]
        start = len(self.server.requests)
        self.answer(self.replies[: self.cut_turn])
        self.server.inject(Fault("abort", token_ids=tuple(self.replies[self.cut_turn]), size=self.partial))
        state = GenerateState(self.args)
        state.pendings = {
            asyncio.ensure_future(generate_and_rm_group(self.args, [self.sample()], dict(PARAMS)))
        }
        while len(self.server.requests) < start + self.cut_turn + 1:
            await asyncio.sleep(0.005)
        ((back,),) = await abort(self.args, rollout_id=0)
        state.reset()
        assert back.metadata["vlm_envs"]["resume"] is not None, back.metadata["vlm_envs"]["resume_error"]
        kept, size = back.response_length, len(json.dumps(back.metadata["vlm_envs"]["resume"]))
        again = copy.deepcopy(back)
        again.metadata["vlm_envs"]["resume"] = None  # the hook before: nothing to resume from
        restarted, restart = await self.handed_back(again, self.replies)
        rest = [self.replies[self.cut_turn][self.partial :], *self.replies[self.cut_turn + 1 :]]
        resumed, resume = await self.handed_back(back, rest)
        for out in (restarted, resumed):
            assert out.tokens == ref.tokens and out.rollout_log_probs == ref.rollout_log_probs
        assert resumed.loss_mask == [0] * kept + ref.loss_mask[kept:] and restarted.loss_mask == ref.loss_mask
        return {"turns": len(self.replies), "size": size, "restart": restart, "resume": resume}


def saved(restart: int, resume: int) -> str:
    return f"{restart - resume:,} ({(restart - resume) / restart:.0%})" if restart else "0"


async def main(names: list[str], cut: float) -> None:
    tiny = build_test_engine("qwen2_vl")
    codec = ChatCodec(tiny.processor)
    head = (
        "| env | turns | cut in turn | resume state | requests restart / resume | generated tokens restart / "
        "resume | prefill tokens restart / resume | generated saved | prefill saved |"
    )
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    totals = {"restart": {"generated": 0, "prefill": 0}, "resume": {"generated": 0, "prefill": 0}}
    with SGLangTestServer(tiny) as server:
        try:
            for name in names:
                GenerateState.forget()
                bench = Bench(server, codec, name, cut)
                got = await bench.run()
                a, b = got["restart"], got["resume"]
                for key in ("generated", "prefill"):
                    totals["restart"][key] += a[key]
                    totals["resume"][key] += b[key]
                print(
                    f"| {name} | {got['turns']} | {bench.cut_turn + 1} ({bench.partial} of "
                    f"{len(bench.replies[bench.cut_turn])} tokens kept) | {got['size']:,} B "
                    f"| {a['requests']} / {b['requests']} "
                    f"| {a['generated']:,} / {b['generated']:,} | {a['prefill']:,} / {b['prefill']:,} "
                    f"| {saved(a['generated'], b['generated'])} | {saved(a['prefill'], b['prefill'])} |"
                )
        finally:
            await hook.close()
    a, b = totals["restart"], totals["resume"]
    print(
        f"| all | | | | | {a['generated']:,} / {b['generated']:,} | {a['prefill']:,} / {b['prefill']:,} "
        f"| {saved(a['generated'], b['generated'])} | {saved(a['prefill'], b['prefill'])} |"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="envs (default: every registered one)")
    parser.add_argument("--cut", type=float, default=0.5, help="where slime aborts, as a share of the turns")
    ns = parser.parse_args()
    if not 0 <= ns.cut <= 1:
        parser.error("--cut must be in [0, 1]")
    asyncio.run(main(ns.names or [spec.name for spec in list_envs()], ns.cut))
