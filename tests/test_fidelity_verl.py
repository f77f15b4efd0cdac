"""The verl attach point of ImageFidelityCheck that docs/interop.md gives, run through verl's own code:
the docs' module, imported by verl as ``external_lib``, wraps ``FSDPEngine._build_module``; verl builds
a tiny Qwen2-VL with it (its monkey patches applied) and runs its patched forward. Every turn's image
passes; a forward missing turn 2's image raises, naming the turn.

It runs in a child process: verl's monkey patches replace transformers' Qwen2-VL forward for the whole
process.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl.workers.engine.fsdp.transformer_impl", reason="needs verl (the verl extra)")

INTEROP = Path(__file__).resolve().parents[1] / "docs" / "interop.md"

#: Builds the model as verl's FSDP engine does (``_build_module`` on an engine holding verl's model
#: and engine configs) and runs two forwards; prints what it saw as JSON.
CHILD = """
import json, sys
import torch
import torch.distributed as dist
from PIL import Image

dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=0, world_size=1)
# verl 0.9.1's apply_monkey_patch imports a class TRL 1.16 no longer has: as without TRL
import verl.models.transformers.monkey_patch as monkey_patch
monkey_patch.is_trl_available = lambda: False
from verl.models.transformers.qwen2_vl import get_rope_index
from verl.workers.config import FSDPEngineConfig, HFModelConfig
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

from vlm_envs.fidelity import ImageFidelityCheck, ImageFidelityError
from vlm_envs.testing.models import build_tiny_processor, save_tiny_model

folder = str(save_tiny_model(sys.argv[1] + "/model", "qwen2_vl"))
config = HFModelConfig(
    path=folder, external_lib="image_check", override_config={"attn_implementation": "eager"},
    use_remove_padding=False,
)
config.model_type = "language_model"  # as verl's TrainingWorker sets it
engine = object.__new__(FSDPEngineWithLMHead)
engine.model_config, engine.engine_config = config, FSDPEngineConfig(model_dtype="fp32")
engine.device_mesh, engine.use_remove_padding, engine.ulysses_sequence_parallel_size = None, False, 1
model = engine._build_module()
hooked = [type(h.__self__).__name__ for h in model._forward_pre_hooks.values() if hasattr(h, "__self__")]

processor = build_tiny_processor("qwen2_vl")
turn = lambda text: {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}
messages = [turn("a"), {"role": "assistant", "content": [{"type": "text", "text": "A"}]}, turn("b")]
images = [Image.new("RGB", (56, 56), "red"), Image.new("RGB", (56, 56), "blue")]
inputs = processor(text=[processor.apply_chat_template(messages, tokenize=False)], images=images,
                   return_tensors="pt")
ids, grids = inputs["input_ids"], inputs["image_grid_thw"]
vision = get_rope_index(processor, ids[0], grids, attention_mask=inputs["attention_mask"][0])
positions = torch.cat([torch.arange(vision.shape[-1])[None], vision]).unsqueeze(1)  # verl's (4, 1, L)
common = dict(input_ids=ids, attention_mask=inputs["attention_mask"], position_ids=positions, use_cache=False)
with torch.no_grad():
    model(**common, pixel_values=inputs["pixel_values"], image_grid_thw=grids)
    first = int(grids[0].prod())
    try:
        model(**common, pixel_values=inputs["pixel_values"][:first], image_grid_thw=grids[:1])
        dropped = None
    except ImageFidelityError as err:
        dropped = str(err)
print(json.dumps({"hooked": hooked, "dropped": dropped}))
"""


def docs_module() -> str:
    """The module docs/interop.md gives for verl (the python block that wraps ``_build_module``)."""
    blocks = re.findall(r"```python\n(.*?)```", INTEROP.read_text(encoding="utf-8"), re.S)
    (module,) = [b for b in blocks if "FSDPEngine._build_module" in b]
    return module


@pytest.mark.slow
def test_the_docs_module_checks_the_model_verl_builds(tmp_path: Path) -> None:
    (tmp_path / "image_check.py").write_text(docs_module(), encoding="utf-8")
    (tmp_path / "child.py").write_text(CHILD, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "child.py"), str(tmp_path), str(tmp_path / "rendezvous")],
        cwd=tmp_path,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])),
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["hooked"] == ["ImageFidelityCheck"]
    assert seen["dropped"] is not None and "sample 0, turn 2" in seen["dropped"], seen
