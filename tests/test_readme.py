"""Every Python and shell block of README.md and of the pages under docs/ runs offline, as written, so
no example can rot; every relative link resolves; every trainer command is checked against the
trainer's own argument parser or config.

Python blocks run as files (``python block.py`` with this interpreter, as a user runs a script, so a
block that spawns worker processes needs its ``__main__`` guard). Shell blocks run line by line
where a line is a command of this project (``vlm-envs ...``, ``python -m vlm_envs...``), with the
interpreter's ``bin`` first on ``PATH``; other lines (``make``, ``pip``, trainers' commands) are not
ours to run. Markers in an HTML comment right before a fence:

- ``<!-- readme-test: skip (why) -->``: the block needs what is not here (a GPU, a hub download);
  ``(... the offline equivalent follows)`` promises that the next block is its offline twin.
- ``<!-- readme-test: patch NAME -->``: the block runs with :data:`PATCHES` ``[NAME]`` applied: setup
  commands first, then named strings swapped (a tiny saved model for a hub model, a few steps for a
  whole run), each of which must be found in the block.

Trainer commands no test here can run (slime's launch, verl's, LLaMA-Factory's YAML) are checked
flag by flag: slime's against tests/docs/slime_flags.txt (made from slime's and Megatron-LM's own
parsers, see tests/docs/make_slime_flags.py), verl's against verl's Hydra config and against what
``make-dataset --trainer verl`` prints, LLaMA-Factory's keys against tests/docs/llamafactory_keys.txt
and transformers' training arguments, ms-swift's ``swift sft`` flags against
tests/docs/ms_swift_flags.txt (see tests/docs/make_ms_swift_flags.py) and transformers' training
arguments.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
HERE = Path(__file__).parent / "docs"
SLIME_FLAGS = HERE / "slime_flags.txt"
LLAMAFACTORY_KEYS = HERE / "llamafactory_keys.txt"
MS_SWIFT_FLAGS = HERE / "ms_swift_flags.txt"
SKIP_RE = re.compile(r"<!--\s*readme-test:\s*skip\s*\((?P<why>.+)\)\s*-->")
PATCH_RE = re.compile(r"<!--\s*readme-test:\s*patch\s+(?P<name>[\w-]+)\s*-->")
FENCE_RE = re.compile(r"^```(?P<lang>\w*)\s*$")
#: Lines of shell blocks this project runs: its command and its modules.
OURS = ("vlm-envs ", "python -m vlm_envs")
TIMEOUT_S = 600


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int  # where the fence opens, 1-based
    skip: str | None  # why it does not run here, from the marker before the fence
    patch: str | None = None  # the name of its patch in PATCHES, from the marker before the fence
    page: str = "README.md"


def readme_blocks(text: str, page: str = "README.md") -> list[Block]:
    """The fenced ``python``, ``bash`` and ``yaml`` blocks, with the marker before each (if any)."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        opened = FENCE_RE.match(lines[i])
        if not opened or not opened.group("lang"):
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        skip, patch = SKIP_RE.search(before), PATCH_RE.search(before)
        if opened.group("lang") in ("python", "bash", "yaml"):
            code = "\n".join(lines[i + 1 : end]) + "\n"
            blocks.append(
                Block(
                    opened.group("lang"),
                    code,
                    i + 1,
                    skip.group("why") if skip else None,
                    patch.group("name") if patch else None,
                    page,
                )
            )
        i = end + 1
    return blocks


def shell_commands(code: str) -> list[str]:
    """The project's commands in a shell block: continuation lines joined, comments dropped."""
    joined = re.sub(r"\s*\\\n\s*", " ", code)
    commands = []
    for line in joined.splitlines():
        command = line.split("  #", 1)[0].strip()
        if command.startswith(OURS):
            commands.append(command)
    return commands


def page_name(page: Path) -> str:
    return str(page.relative_to(ROOT))


BLOCKS = {page_name(p): readme_blocks(p.read_text(encoding="utf-8"), page_name(p)) for p in PAGES}
ALL_BLOCKS = [b for blocks in BLOCKS.values() for b in blocks]
RUNNABLE = [b for b in ALL_BLOCKS if b.lang in ("python", "bash")]


def _env() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    path = os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "PYTHONPATH": path}


def _run(argv: list[str], cwd: Path, where: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL
    )
    assert proc.returncode == 0, f"{where}: {shlex.join(argv)}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


# ---- patches: what a block that needs a hub model or a GPU runs with here -------------------------

#: A tiny Qwen3-VL saved to a folder (vlm_envs.testing.save_tiny_model).
_TINY_MODEL = """\
from vlm_envs.testing.models import save_tiny_model

TINY_MODEL = str(save_tiny_model("tiny-qwen3-vl", "qwen3_vl"))
"""


def _config_override(module: str, name: str, overrides: str) -> str:
    """Replace ``module.name`` (a TRL config class) by one that applies ``overrides`` after the
    block's own keywords, which still go through the real class."""
    return f"""\
import {module}

_{name} = {module}.{name}


def _{name}_here(**kwargs):
    kwargs.update({overrides})
    return _{name}(**kwargs)


{module}.{name} = _{name}_here
"""


#: TRL refuses assistant-only loss on images below transformers 5.18 and verl pins the venv's below
#: 5.11: the SFT script runs with the transformers ``make install`` puts in .venv/overlays/trl-sft.
_TRL_SFT_PATH = f"""\
import sys

sys.path.insert(0, {str(Path(sys.prefix) / "overlays" / "trl-sft")!r})
"""
#: The tiny model's folder with Qwen3-VL's chat template as Qwen ship it (TRL stores the file), which
#: TRL swaps for its ``{% generation %}``-marked copy. The script loads the folder's processor itself.
_SHIPPED_TEMPLATE = """\
from pathlib import Path

from trl.chat_template_utils import qwen3_vl_chat_template

Path(TINY_MODEL, "chat_template.jinja").write_text(qwen3_vl_chat_template, encoding="utf-8")
"""


@dataclass(frozen=True)
class Patch:
    """How a block runs here: ``setup`` commands first (in the block's folder), ``swaps`` (each must
    be found in the block), ``before`` and ``after`` code around it."""

    setup: tuple[str, ...] = ()
    swaps: tuple[tuple[str, str], ...] = ()
    before: str = ""
    after: str = ""


#: GRPOConfig / SFTConfig keywords of a CPU run of a few steps (applied after the block's own).
_CPU_STEPS = ", ".join(
    (
        "use_cpu=True",
        "bf16=False",
        "save_strategy='no'",
        "per_device_train_batch_size=2",
        "gradient_accumulation_steps=1",
    )
)
PATCHES: dict[str, Patch] = {
    # docs/trl.md: GRPO on Sokoban with Qwen3-VL-2B-Instruct -> one step of a tiny Qwen3-VL on CPU
    "trl-grpo": Patch(
        setup=(
            "vlm-envs make-dataset sokoban -n 2 --max-turns 2 --trainer trl --out data/sokoban_trl.parquet",
        ),
        swaps=(('"Qwen/Qwen3-VL-2B-Instruct"', "TINY_MODEL"),),
        before=_TINY_MODEL
        + _config_override(
            "trl",
            "GRPOConfig",
            f"dict({_CPU_STEPS}, max_steps=1, num_generations=2, max_completion_length=200, "
            "generation_kwargs={'max_new_tokens': 16})",
        ),
        after="assert trainer.state.global_step == 1, trainer.state\n",
    ),
    # docs/sft.md: SFT of Qwen3-VL-2B-Instruct on make-sft's trl conversations -> two steps of a tiny
    # Qwen3-VL with Qwen3-VL's own chat template, under transformers 5.24 (see _TRL_SFT)
    "trl-sft": Patch(
        setup=("vlm-envs make-sft sokoban -n 2 --max-turns 3 --out sft/sokoban --format trl --rationale",),
        swaps=(('"Qwen/Qwen3-VL-2B-Instruct"', "TINY_MODEL"),),
        before=_TRL_SFT_PATH
        + _TINY_MODEL
        + _SHIPPED_TEMPLATE
        + _config_override("trl", "SFTConfig", f"dict({_CPU_STEPS}, max_steps=2)"),
        after=(
            "import os\n"
            "assert trainer.state.global_step == 2, trainer.state\n"
            "assert os.path.isfile('sokoban-sft/model.safetensors'), os.listdir('sokoban-sft')\n"
            "assert load_processor('sokoban-sft').chat_template == processor.chat_template  # saved whole\n"
        ),
    ),
}


def patched(block: Block) -> tuple[tuple[str, ...], str]:
    """The setup commands and the code ``block`` runs with here."""
    if block.patch is None:
        return (), block.code
    assert block.patch in PATCHES, f"{block.page} line {block.line}: no patch named {block.patch!r}"
    patch = PATCHES[block.patch]
    code = block.code
    for old, new in patch.swaps:
        assert old in code, (
            f"{block.page} line {block.line}: patch {block.patch!r} swaps {old!r}, not in the block"
        )
        code = code.replace(old, new)
    return patch.setup, patch.before + "\n" + code + patch.after


# ---- the blocks run ---------------------------------------------------------------------------------


def test_the_pages_have_blocks_and_every_skipped_one_has_an_offline_equivalent_after_it():
    readme = BLOCKS["README.md"]
    assert sum(b.lang == "python" for b in readme) >= 1 and sum(b.lang == "bash" for b in readme) >= 2
    assert sum(b.lang == "python" for b in ALL_BLOCKS) >= 8 and len(BLOCKS) >= 6
    for blocks in BLOCKS.values():
        runnable = [b for b in blocks if b.lang in ("python", "bash")]
        for k, block in enumerate(runnable):
            if block.skip and "offline equivalent follows" in block.skip:
                after = runnable[k + 1] if k + 1 < len(runnable) else None
                assert after is not None and after.skip is None, (
                    f"{block.page} line {block.line}: no offline block after it"
                )
            assert not (block.skip and block.patch), (
                f"{block.page} line {block.line}: skip or patch, not both"
            )


@pytest.mark.slow
@pytest.mark.parametrize("block", RUNNABLE, ids=[f"{b.page}-{b.lang}-line{b.line}" for b in RUNNABLE])
def test_block_runs(block: Block, tmp_path: Path) -> None:
    where = f"{block.page} line {block.line}"
    if block.skip:
        pytest.skip(f"{where}: {block.skip}")
    setup, code = patched(block)
    for command in setup:
        _run(shlex.split(command), tmp_path, f"{where} (setup)")
    if block.lang == "python":
        script = tmp_path / "block.py"
        script.write_text(code, encoding="utf-8")
        _run([sys.executable, str(script)], tmp_path, where)
        return
    commands = shell_commands(code)
    if not commands:
        pytest.skip(f"{where}: no vlm-envs command in this block (make, pip, trainers' commands)")
    for command in commands:
        _run(shlex.split(command), tmp_path, where)


def test_a_python_block_runs_as_a_file_so_a_missing_main_guard_shows(tmp_path: Path) -> None:
    """A block that spawns processes without ``if __name__ == "__main__":`` fails as a file (each
    spawned process re-runs it), which ``python -c`` did not show."""
    unguarded = (
        "import multiprocessing as mp\n"
        "ctx = mp.get_context('spawn')\n"
        "p = ctx.Process(target=print)\n"
        "p.start(); p.join()\n"
        "assert p.exitcode == 0, p.exitcode\n"
    )
    script = tmp_path / "block.py"
    script.write_text(unguarded, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode != 0
    guarded = "import multiprocessing as mp\nif __name__ == '__main__':\n" + "".join(
        "    " + line + "\n" for line in unguarded.splitlines()
    )
    script.write_text(guarded, encoding="utf-8")
    _run([sys.executable, str(script)], tmp_path, "guarded")


def test_every_patch_is_used_once_and_finds_what_it_swaps():
    used = [b.patch for b in ALL_BLOCKS if b.patch]
    assert sorted(used) == sorted(PATCHES), used
    for block in ALL_BLOCKS:
        if block.patch:
            patched(block)  # asserts every swapped string is in the block


def test_the_block_reader_sees_markers_fences_and_commands():
    text = (
        "<!-- readme-test: skip (needs a GPU; the offline equivalent follows) -->\n"
        "```bash\nvllm serve x\n```\n"
        "```python\nprint(1)\n```\n```toml\na = 1\n```\n"
        "```bash\nmake demo  # no\nvlm-envs eval a \\\n    -n 2  # yes\n  --flag x\n```\n"
        "<!-- readme-test: patch trl-sft -->\n```python\nx = 1\n```\n"
    )
    gpu, offline, shell, patch = readme_blocks(text, "page.md")
    assert (gpu.skip, offline.skip, offline.code, offline.line, offline.page) == (
        "needs a GPU; the offline equivalent follows",
        None,
        "print(1)\n",
        5,
        "page.md",
    )
    assert shell_commands(shell.code) == ["vlm-envs eval a -n 2"]
    assert (patch.patch, patch.skip) == ("trl-sft", None)


# ---- links ------------------------------------------------------------------------------------------

LINK_RE = re.compile(
    r"!?\[[^\]]*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)"  # [text](target), ![alt](target)
    r"|<(?:img|a)\s[^>]*?(?:src|href)=\"(?P<html>[^\"]+)\""  # <img src="target">, <a href="target">
)


def link_targets(text: str) -> list[str]:
    """Every link and picture target of a page, code blocks and spans included."""
    return [m.group("target") or m.group("html") for m in LINK_RE.finditer(text)]


def anchors(text: str) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation but ``-`` and ``_`` dropped,
    spaces to ``-``."""
    out = set()
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^#{1,6}\s+(.*)$", line)):
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


def test_every_relative_link_resolves_to_a_file_and_its_anchor():
    broken = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for target in link_targets(text):
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page_name(page)}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text(encoding="utf-8")):
                broken.append(f"{page_name(page)}: {target} (no such heading)")
    assert not broken, broken


def test_the_link_check_sees_links_and_anchors():
    assert link_targets('see [a](docs/a.md#b-c), ![p](x.png) and <img src="y.png" height="9">') == [
        "docs/a.md#b-c",
        "x.png",
        "y.png",
    ]
    assert anchors("# Train with `slime`\n```\n# not a heading\n```\n## Where: in process, or Ray?\n") == {
        "train-with-slime",
        "where-in-process-or-ray",
    }


def test_every_docs_page_is_linked_from_the_readme():
    readme = README.read_text(encoding="utf-8")
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in link_targets(readme)}
    assert not [page_name(p) for p in PAGES[1:] if p.resolve() not in linked]


# ---- slime: every flag of every slime command in the docs, against slime's own parser -------------


@dataclass(frozen=True)
class FlagFile:
    commits: dict[str, str]  # slime / megatron -> owner/name@commit
    flags: dict[str, dict[str, str]]  # flag -> {"nargs": ..., "type": ..., "choices": ..., "section": ...}


def read_flag_file(path: Path = SLIME_FLAGS) -> FlagFile:
    commits, flags, section = {}, {}, None
    for line in path.read_text(encoding="utf-8").splitlines():
        if m := re.match(r"^# (slime|megatron) (\S+@[0-9a-f]{40})$", line):
            commits[m.group(1)] = m.group(2)
        elif line.startswith("#") or not line.strip():
            continue
        elif m := re.match(r"^\[(\w+)\]$", line):
            section = m.group(1)
        else:
            flag, *words = line.split()
            flags[flag] = {"section": section, **dict(w.split("=", 1) for w in words)}
    return FlagFile(commits, flags)


def flag_parser(flags: dict[str, dict[str, str]]) -> argparse.ArgumentParser:
    """An argparse parser with slime's flags, their arity, number types and choices (as slime's
    train.py parser takes them, but without ``ignore_unknown_args``: an unknown flag is an error)."""
    parser = argparse.ArgumentParser(prog="train.py", allow_abbrev=False, add_help=False, exit_on_error=False)
    for flag, spec in flags.items():
        if spec["nargs"] == "0":
            parser.add_argument(flag, action="store_true")
            continue
        nargs = spec["nargs"]
        kwargs = {
            "nargs": int(nargs) if nargs.isdigit() and nargs != "1" else (None if nargs == "1" else nargs)
        }
        kwargs["type"] = {"int": int, "float": float}.get(spec.get("type", ""), str)
        if "choices" in spec:
            kwargs["choices"] = [kwargs["type"](c) for c in spec["choices"].split(",")]
        parser.add_argument(flag, **kwargs)
    return parser


def slime_arguments(code: str) -> list[str]:
    """The arguments of a slime command in a shell block: after ``train.py`` when the block launches
    it, else every line of flags; comments and line continuations dropped, shell quoting undone."""
    lines = [line.split("  #", 1)[0] for line in code.splitlines() if not line.strip().startswith("#")]
    words = shlex.split(re.sub(r"\\\n", " ", "\n".join(lines)))
    if "train.py" in words:
        return words[words.index("train.py") + 1 :]
    return [w for line in lines if line.strip().startswith("--") for w in shlex.split(line.replace("\\", ""))]


def check_slime_arguments(words: list[str], flags: FlagFile) -> list[str]:
    """What is wrong with a slime command line (empty: every flag exists and parses)."""
    unknown = [w for w in words if w.startswith("--") and w not in flags.flags]
    if unknown:
        return [f"not a flag of slime's parser: {w}" for w in unknown]
    try:
        flag_parser(flags.flags).parse_args(words)
    except (argparse.ArgumentError, SystemExit) as e:
        return [str(e)]
    return []


SLIME_BLOCKS = [b for b in ALL_BLOCKS if b.lang == "bash" and "--custom-generate-function-path" in b.code]


def test_the_flag_file_names_slime_and_megatron_commits_and_holds_their_flags():
    flags = read_flag_file()
    assert flags.commits["slime"].startswith("THUDM/slime@")
    assert flags.commits["megatron"].startswith("NVIDIA/Megatron-LM@")
    sections = {spec["section"] for spec in flags.flags.values()}
    assert sections == {"slime", "megatron", "sglang"}
    assert flags.flags["--advantage-estimator"]["section"] == "slime"
    assert flags.flags["--tensor-model-parallel-size"]["section"] == "megatron"


def test_the_slime_commit_the_flags_were_read_from_is_the_one_the_docs_state():
    commit = read_flag_file().commits["slime"].split("@")[1]
    slime_page = (DOCS / "slime.md").read_text(encoding="utf-8")
    assert commit in slime_page
    megatron = read_flag_file().commits["megatron"].split("@")[1]
    assert megatron in slime_page


@pytest.mark.parametrize("block", SLIME_BLOCKS, ids=[f"{b.page}-line{b.line}" for b in SLIME_BLOCKS])
def test_every_flag_of_a_slime_command_is_one_slimes_parser_takes(block: Block) -> None:
    words = slime_arguments(block.code)
    assert "--custom-generate-function-path" in words
    assert check_slime_arguments(words, read_flag_file()) == [], f"{block.page} line {block.line}"


def test_the_docs_have_one_complete_slime_launch():
    launches = [b for b in SLIME_BLOCKS if "train.py" in b.code]
    assert [b.page for b in launches] == ["docs/slime.md"]
    words = slime_arguments(launches[0].code)
    for needed in (
        "--advantage-estimator",
        "--n-samples-per-prompt",
        "--rollout-batch-size",
        "--global-batch-size",
        "--lr",
        "--kl-loss-coef",
        "--hf-checkpoint",
        "--prompt-data",
        "--input-key",
        "--label-key",
        "--metadata-key",
        "--multimodal-keys",
        "--custom-config-path",
        "--sglang-mem-fraction-static",
        "--tensor-model-parallel-size",
    ):
        assert needed in words, needed
    value = words[words.index("--custom-generate-function-path") + 1]
    assert value == "vlm_envs.rollout.slime.generate"


def test_the_slime_check_fails_on_a_bad_flag_a_bad_value_and_a_switch_given_a_value():
    flags = read_flag_file()
    good = ["--advantage-estimator", "grpo", "--n-samples-per-prompt", "8", "--colocate"]
    assert check_slime_arguments(good, flags) == []
    assert check_slime_arguments([*good, "--n-samples-per-promt", "8"], flags)
    assert check_slime_arguments(["--advantage-estimator", "grpp"], flags)
    assert check_slime_arguments(["--n-samples-per-prompt", "eight"], flags)
    assert check_slime_arguments(["--colocate", "yes"], flags)


# ---- verl: the launch commands, against verl's Hydra config and what make-dataset prints ----------

VERL_BLOCKS = [b for b in ALL_BLOCKS if b.lang == "bash" and "verl.trainer.main_ppo" in b.code]


@pytest.mark.slow
@pytest.mark.parametrize("block", VERL_BLOCKS, ids=[f"{b.page}-line{b.line}" for b in VERL_BLOCKS])
def test_a_verl_launch_is_what_make_dataset_prints_and_composes_with_verls_config(
    block: Block, tmp_path: Path
) -> None:
    pytest.importorskip("verl.trainer", reason="verl is not installed (pip install 'vlm-envs[verl]')")
    from verl_support import verl_config

    words = shlex.split(re.sub(r"\\\n", " ", block.code))
    start = words.index("verl.trainer.main_ppo")
    name, overrides = words[start + 2], words[start + 3 :]
    assert words[start + 1] == "--config-name"
    (make,) = shell_commands(block.code)
    proc = _run(shlex.split(make), tmp_path, f"{block.page} line {block.line}")
    printed = shlex.split(
        proc.stdout[proc.stdout.index("python3 -m verl.trainer.main_ppo") :].replace("\\\n", " ")
    )
    here = [w.replace("$PWD", str(tmp_path)) for w in overrides]
    made = printed[5:]
    assert printed[3:5] == ["--config-name", name]
    # a block may choose its own estimator and add overrides of its own after make-dataset's (GiGPO's run)
    assert [_any_estimator(w) for w in here[: len(made)]] == [_any_estimator(w) for w in made]
    cfg = verl_config(here, name=name)
    assert cfg.actor_rollout_ref.rollout.agent.default_agent_loop == "vlm_envs"


def _any_estimator(override: str) -> str:
    return "algorithm.adv_estimator=" if override.startswith("algorithm.adv_estimator=") else override


# ---- LLaMA-Factory: the training YAML's keys, against its argument classes -------------------------


def read_llamafactory_keys(path: Path = LLAMAFACTORY_KEYS) -> dict[str, set[str]]:
    sections: dict[str, set[str]] = {}
    current = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if m := re.match(r"^\[(\w+)\]$", line):
            current = sections.setdefault(m.group(1), set())
        else:
            current.add(line.strip())
    return sections


LLAMAFACTORY_BLOCKS = [b for b in ALL_BLOCKS if b.lang == "yaml" and re.search(r"^stage: sft$", b.code, re.M)]


@pytest.mark.parametrize(
    "block", LLAMAFACTORY_BLOCKS, ids=[f"{b.page}-line{b.line}" for b in LLAMAFACTORY_BLOCKS]
)
def test_every_key_of_a_llamafactory_yaml_is_an_argument_it_takes(block: Block) -> None:
    import yaml
    from transformers import Seq2SeqTrainingArguments

    from vlm_envs.sft.formats import LLAMAFACTORY_NAME

    known = read_llamafactory_keys()
    hf_fields = {f.name for f in dataclasses.fields(Seq2SeqTrainingArguments)}
    config = yaml.safe_load(block.code)
    assert not [k for k in config if k not in known["keys"] | hf_fields], f"{block.page} line {block.line}"
    assert config["template"] in known["templates"]
    assert config["dataset"] == LLAMAFACTORY_NAME  # the name make-sft's dataset_info.json gives the data


def test_the_docs_have_a_llamafactory_yaml_and_the_key_check_can_fail():
    assert [b.page for b in LLAMAFACTORY_BLOCKS] == ["docs/sft.md"]
    known = read_llamafactory_keys()
    assert {"dataset_dir", "dataset", "template", "finetuning_type"} <= known["keys"]
    assert "datasets_dir" not in known["keys"] and "qwen2_vl" in known["templates"]


# ---- ms-swift: the flags of `swift sft`, against its argument classes -------------------------------


SWIFT_BLOCKS = [b for b in ALL_BLOCKS if b.lang == "bash" and re.search(r"\bswift sft\b", b.code)]


def swift_flags(code: str) -> list[str]:
    """The ``--flag`` names of the ``swift sft`` command in ``code``."""
    words = shlex.split(code.replace("\\\n", " "))
    start = words.index("sft", words.index("swift"))
    return [w[2:].split("=", 1)[0] for w in words[start + 1 :] if w.startswith("--")]


def read_ms_swift_flags(path: Path = MS_SWIFT_FLAGS) -> dict[str, set[str]]:
    return read_llamafactory_keys(path)  # the same layout: [section] lines


def check_swift_flags(flags: list[str]) -> list[str]:
    from transformers import Seq2SeqTrainingArguments

    known = read_ms_swift_flags()["flags"] | {f.name for f in dataclasses.fields(Seq2SeqTrainingArguments)}
    return [flag for flag in flags if flag not in known]


@pytest.mark.parametrize("block", SWIFT_BLOCKS, ids=[f"{b.page}-line{b.line}" for b in SWIFT_BLOCKS])
def test_every_flag_of_a_swift_sft_command_is_one_ms_swift_takes(block: Block) -> None:
    flags = swift_flags(block.code)
    assert "dataset" in flags and "model" in flags
    assert not check_swift_flags(flags), f"{block.page} line {block.line}"
    version = next(iter(read_ms_swift_flags()["version"]))
    assert f"ms-swift {version}" in (ROOT / block.page).read_text(encoding="utf-8")  # the release named


def test_the_docs_have_a_swift_command_and_the_flag_check_can_fail():
    assert [b.page for b in SWIFT_BLOCKS] == ["docs/sft.md"]
    assert check_swift_flags(["tuner_type", "learning_rate"]) == []
    assert check_swift_flags(["train_type", "datasets"]) == ["train_type", "datasets"]  # ms-swift 3's name
