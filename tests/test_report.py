"""The HTML report as text: self-contained, hostile model text stays data, histograms count right."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
from PIL import Image

from vlm_envs.eval.summary import summarize
from vlm_envs.report import histogram_svg, render_report, write_report


def _record(episode: int, reward: float, turns: int, text: str = "<answer>Up</answer>") -> dict:
    return {
        "episode": episode,
        "seed": episode,
        "status": "completed",
        "error": None,
        "reward": reward,
        "success": reward > 0,
        "num_turns": turns,
        "tokens": None,
        "metrics": {"success": reward > 0},
        "turns": [
            {"turn": 0, "observation": {"text": "board <image>", "role": "user", "images": ["frames/a.png"]}},
            *[
                {
                    "turn": k,
                    "model_text": text,
                    "reward": 0.0,
                    "done": False,
                    "metrics": {},
                    "observation": None,
                }
                for k in range(1, turns + 1)
            ],
        ],
    }


def test_page_needs_no_network_and_embeds_every_episode() -> None:
    records = [_record(i, float(i % 2), 1 + i % 3) for i in range(5)]
    page = render_report(records, summarize(records, {"env": "sokoban", "policy": "solver"}))
    assert "vlm-envs eval: sokoban with solver" in page
    assert not re.search(r"(src|href)=[\"']?(https?:)?//", page)  # nothing fetched from elsewhere
    data = re.search(r'<script type="application/json" id="episodes-data">(.*?)</script>', page, re.S)
    assert data is not None
    episodes = json.loads(data.group(1))
    assert [e["episode"] for e in episodes] == list(range(5))
    assert episodes[0]["turns"][0]["observation"]["images"] == ["frames/a.png"]


def test_hostile_model_text_cannot_close_the_script_or_inject_markup() -> None:
    hostile = "</script><script>alert(1)</script><!-- \u2028 <img src=x onerror=alert(2)>"
    records = [_record(0, 1.0, 1, text=hostile)]
    page = render_report(records, summarize(records, {"env": "<b>env</b>", "policy": "p"}))
    assert page.count("</script>") == 2  # the data block's and the viewer's, nothing from the data
    assert "<b>env</b>" not in page and "&lt;b&gt;env&lt;/b&gt;" in page
    data = re.search(r'id="episodes-data">(.*?)</script>', page, re.S)
    assert json.loads(data.group(1))[0]["turns"][1]["model_text"] == hostile


def test_histograms_count_values() -> None:
    svg = histogram_svg("turns", [1, 1, 3, 3, 3], integer=True)
    bars = re.findall(r"<text[^>]*>(\d+)</text>", svg)
    # counts above the bars, then the bin labels 1, 2, 3 under them
    assert bars[0::2] == ["2", "0", "3"] and bars[1::2] == ["1", "2", "3"]
    assert svg.count("<rect") == 3
    wide = histogram_svg("reward", [i / 100 for i in range(100)])
    assert wide.count("<rect") == 10
    assert "no data" in histogram_svg("empty", [])


def test_write_report_puts_index_html_in_the_folder(tmp_path: Path) -> None:
    records = [_record(0, 1.0, 2)]
    path = write_report(tmp_path, records, summarize(records))
    assert path == tmp_path / "index.html" and path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert '"images": ["frames/a.png"]' in path.read_text(encoding="utf-8")  # missing on disk: linked


def test_the_report_embeds_its_frames_or_links_them(tmp_path: Path) -> None:
    (tmp_path / "frames").mkdir()
    Image.new("RGB", (4, 4), "red").save(tmp_path / "frames" / "a.png")
    png = (tmp_path / "frames" / "a.png").read_bytes()
    records = [_record(0, 1.0, 2)]
    embedded = write_report(tmp_path, records, summarize(records)).read_text(encoding="utf-8")
    assert f'"images": ["data:image/png;base64,{base64.b64encode(png).decode()}"]' in embedded
    assert "frames/a.png" not in embedded
    linked = write_report(tmp_path, records, summarize(records), mode="linked").read_text(encoding="utf-8")
    assert '"images": ["frames/a.png"]' in linked and "data:image/png" not in linked
    with pytest.raises(ValueError, match="use one of self-contained, linked"):
        write_report(tmp_path, records, summarize(records), mode="zip")


def test_unknown_tokens_say_unknown() -> None:
    page = render_report([_record(0, 1.0, 1)], summarize([_record(0, 1.0, 1)]))
    assert "<th>mean tokens</th><td>unknown (the policy reports no token counts)</td>" in page


def test_an_episode_that_failed_at_reset_shows_its_error_not_an_empty_turn() -> None:
    from vlm_envs.eval import EvalConfig
    from vlm_envs.eval.episodes import failed_result, finish

    config = EvalConfig(env="sokoban", policy="random", n=1, out=Path())
    record = finish(failed_result(config, 0, "env: RuntimeError: no level for this seed"), 0, "random").record
    page = render_report([record], summarize([record]))
    data = re.search(r'id="episodes-data">(.*?)</script>', page, re.S)
    (episode,) = json.loads(data.group(1))
    assert episode["turns"] == [] and episode["error"] == "env: RuntimeError: no level for this seed"
    assert "failed before its first observation" in page
