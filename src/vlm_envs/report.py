"""The eval report: one ``index.html`` (inline CSS, JS and SVG; no network).

It shows the summary, reward and turn histograms, and an episode viewer with every turn's
images, model text and env feedback. Images are either embedded as ``data:`` URIs (``self-contained``:
the file alone can be mailed or uploaded) or linked to the PNG files under ``frames/`` next to the
page (``linked``: a smaller page for big runs). Model text is hostile: the page puts it in as text
nodes, never as HTML.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vlm_envs.files import write_atomic

REPORT_FILE = "index.html"
#: How the report holds its images: embedded in the page, or linked to ``frames/``.
REPORT_MODES = ("self-contained", "linked")
DEFAULT_REPORT_MODE = "self-contained"


def _bins(values: Sequence[float], integer: bool) -> list[tuple[str, int]]:
    """``(label, count)`` bars: one per value when few distinct values, else 10 equal-width bins."""
    if not values:
        return []
    distinct = sorted(set(values))
    low, high = min(values), max(values)
    if (integer and high - low <= 30) or len(distinct) <= 10:
        counts = Counter(values)
        if integer:
            distinct = [float(v) for v in range(int(low), int(high) + 1)]
        return [(f"{v:g}", counts.get(v, 0)) for v in distinct]
    width = (high - low) / 10
    counts = Counter(min(9, int((v - low) / width)) for v in values)
    return [(f"{low + i * width:.3g}", counts.get(i, 0)) for i in range(10)]


def histogram_svg(title: str, values: Sequence[float], integer: bool = False) -> str:
    """A small bar chart as inline SVG."""
    bars = _bins(values, integer)
    width, height, top, bottom = 340, 190, 40, 34  # top: the title, then room for a count label
    parts = [
        f'<svg class="hist" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{html.escape(title)}">',
        f'<text x="{width / 2}" y="16" text-anchor="middle" class="t">{html.escape(title)}</text>',
    ]
    if not bars:
        parts.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle">no data</text></svg>')
        return "".join(parts)
    peak = max(count for _, count in bars) or 1
    slot = (width - 20) / len(bars)
    plot = height - top - bottom
    for i, (label, count) in enumerate(bars):
        h = plot * count / peak
        x = 10 + i * slot
        y = top + plot - h
        parts.append(
            f'<rect x="{x + slot * 0.1:.1f}" y="{y:.1f}" width="{slot * 0.8:.1f}" height="{h:.1f}"/>'
        )
        parts.append(f'<text x="{x + slot / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle">{count}</text>')
        parts.append(
            f'<text x="{x + slot / 2:.1f}" y="{height - bottom + 14}" text-anchor="middle">'
            f"{html.escape(label)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if math.isfinite(value) else str(value)
    return str(value)


def _known(value: Any) -> Any:
    return "unknown (the policy reports no token counts)" if value is None else value


def _optimal(summary: Mapping[str, Any]) -> str:
    """The share of replies that lowered the distance to the goal by one, of those whose env could tell."""
    rate, turns = summary.get("action_optimal_rate"), summary.get("action_optimal_turns")
    if not isinstance(rate, float) or not isinstance(turns, int):
        return "unknown (the env does not say its distance to the goal)"
    return f"{rate:.1%} of {turns} replies lowered the distance to the goal by one"


def _summary_html(summary: Mapping[str, Any]) -> str:
    run = summary.get("run") or {}
    rate = summary.get("success_rate")
    low, high = summary.get("success_ci95") or [0.0, 1.0]
    rows = [
        ("env", run.get("env")),
        ("policy", run.get("policy")),
        ("episodes", summary.get("episodes")),
        ("success rate", "-" if rate is None else f"{rate:.1%} (95% CI {low:.1%} to {high:.1%})"),
        ("mean reward", summary.get("mean_reward")),
        ("mean turns", summary.get("mean_turns")),
        ("optimal replies", _optimal(summary)),
        ("mean tokens", _known(summary.get("mean_tokens"))),
        ("statuses", ", ".join(f"{k}: {v}" for k, v in (summary.get("status_counts") or {}).items())),
    ]
    counts, n = summary.get("metric_counts") or {}, summary.get("episodes")
    for name, value in (summary.get("metrics") or {}).items():
        partial = (
            f" ({counts[name]} of {n} episodes report it; the others count as 0)"
            if counts.get(name, n) != n
            else ""
        )
        rows.append((f"metric: {name}", f"{_fmt(value)}{partial}"))
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(_fmt(v))}</td></tr>" for k, v in rows)
    return f'<table class="summary">{body}</table>'


def _png_data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _embed_images(observation: Any, out_dir: Path) -> Any:
    """The observation record with its frame paths replaced by the frames as data URIs."""
    if not observation:
        return observation
    # a frame missing on disk keeps its path: the page still renders and shows which one is missing
    paths = observation.get("images") or []
    images = [_png_data_uri(out_dir / rel) if (out_dir / rel).is_file() else rel for rel in paths]
    return {**observation, "images": images}


def _episode_view(record: Mapping[str, Any], embed_from: Path | None = None) -> dict[str, Any]:
    """The fields the viewer needs (reset info and per-turn env info stay in results.jsonl); with
    ``embed_from``, frames are read from that folder and embedded. A turn with neither an observation
    nor a reply (an episode that failed at reset) is left out: the viewer shows the error instead."""
    keep = ("episode", "seed", "status", "error", "reward", "success", "num_turns", "tokens", "metrics")
    view = {k: record.get(k) for k in keep}
    view["turns"] = [
        {
            "turn": t.get("turn"),
            "model_text": t.get("model_text"),
            "reward": t.get("reward"),
            "done": t.get("done"),
            "metrics": t.get("metrics"),
            "observation": t.get("observation")
            if embed_from is None
            else _embed_images(t.get("observation"), embed_from),
            "context_turns": t.get("context_turns"),
            "distance_to_goal": t.get("distance_to_goal"),
            "next_distance_to_goal": t.get("next_distance_to_goal"),
            "action_optimal": t.get("action_optimal"),
        }
        for t in record.get("turns", [])
        if t.get("observation") or t.get("model_text") is not None
    ]
    return view


_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#f6f6f4}
header{padding:12px 20px;background:#2d3e50;color:#fff}
h1{margin:0;font-size:20px}
main{padding:16px 20px}
.row{display:flex;gap:20px;flex-wrap:wrap;align-items:flex-start}
table.summary{border-collapse:collapse;background:#fff}
table.summary th,table.summary td{padding:3px 10px;border-bottom:1px solid #e4e4e4;text-align:left}
.hist{background:#fff}
.hist rect{fill:#4a7fb0}
.hist text{font-size:11px;fill:#333}
.hist .t{font-size:13px;font-weight:600}
#viewer{display:flex;gap:16px;margin-top:20px}
#list{width:260px;max-height:80vh;overflow:auto;background:#fff}
#list button{display:block;width:100%;text-align:left;border:0;border-bottom:1px solid #eee;
  padding:5px 8px;background:#fff;cursor:pointer;font:inherit}
#list button.sel{background:#dbe8f5}
.ok{color:#18794e}
.bad{color:#b42318}
#episode{flex:1;min-width:0}
.turn{background:#fff;margin-bottom:12px;padding:10px 12px;border-left:4px solid #4a7fb0}
.turn h3{margin:0 0 6px;font-size:14px}
pre{white-space:pre-wrap;word-break:break-word;background:#f3f3f3;padding:6px;margin:4px 0;
  max-height:24em;overflow:auto}
.frames img{max-width:320px;image-rendering:pixelated;border:1px solid #ccc;margin:4px 4px 0 0}
.label{font-size:12px;color:#666;text-transform:uppercase}
.filters{margin:8px 0}
.none{padding:8px 12px;color:#555;font-style:italic}
"""

_JS = r"""
(function(){
  const data = JSON.parse(document.getElementById('episodes-data').textContent);
  const list = document.getElementById('list'), pane = document.getElementById('episode');
  let shown = data, current = 0;
  function el(tag, cls, text){const e=document.createElement(tag); if(cls) e.className=cls;
    if(text!==undefined&&text!==null) e.textContent=String(text); return e;}
  function block(label, text){const d=el('div'); d.appendChild(el('div','label',label));
    d.appendChild(el('pre',null,text)); return d;}
  function image(src, t){const im=el('img'); im.src=src; im.alt='turn '+t.turn+' frame'; return im;}
  function observation(obs, t){
    // images stand at their slots (offsets into the text); without slots they come first
    const d=el('div'), imgs=obs.images||[], text=obs.text||'', slots=obs.image_slots||[];
    d.appendChild(el('div','label', (t.turn===0?'env':'env feedback')+' ('+obs.role+')'));
    const body=el('div','obs');
    const at=slots.length===imgs.length?slots:imgs.map(()=>0);
    let start=0;
    imgs.forEach((src,i)=>{
      const piece=text.slice(start,at[i]); start=at[i];
      if(piece.trim()) body.appendChild(el('pre',null,piece.replace(/^\n|\n$/g,'')));
      const f=el('div','frames'); f.appendChild(image(src,t)); body.appendChild(f);
    });
    const rest=text.slice(start);
    if(rest.trim()) body.appendChild(el('pre',null,rest.replace(/^\n|\n$/g,'')));
    d.appendChild(body); return d;
  }
  function distance(d){return d===-1?'unreachable':String(d);}
  function standing(t){
    if(t.distance_to_goal===null||t.distance_to_goal===undefined) return '';
    const next=t.next_distance_to_goal, after=next===null||next===undefined?'?':distance(next);
    return '; distance to goal '+distance(t.distance_to_goal)+' \u2192 '+after+
      (t.action_optimal===true?' (optimal)':t.action_optimal===false?' (not optimal)':'');
  }
  function metrics(m){return Object.entries(m||{}).map(([k,v])=>k+'='+v).join('  ');}
  function show(i){
    current=i; pane.replaceChildren();
    Array.from(list.children).forEach((b,j)=>b.classList.toggle('sel', j===i));
    const ep=shown[i]; if(!ep) return;
    const head=el('h2',null,'Episode '+ep.episode+' (seed '+ep.seed+'): '+ep.status+', reward '+ep.reward+
      (ep.success?', success':''));
    pane.appendChild(head);
    if(ep.error) pane.appendChild(block(ep.turns.length?'error':
      'error: the episode failed before its first observation', ep.error));
    ep.turns.forEach(t=>{
      const box=el('section','turn'); box.dataset.turn=t.turn;
      box.appendChild(el('h3',null, t.turn===0 ? 'Turn 0: first observation' :
        'Turn '+t.turn+': reward '+t.reward+(t.done?', done':'')+standing(t)));
      const ct=t.context_turns;
      if(ct) box.appendChild(el('div','label', 'the model saw: the task'+(ct.length?', turns '+ct.join(', '):
        (t.turn>1?' and the latest observation':''))));
      if(t.model_text!==undefined&&t.model_text!==null) box.appendChild(block('model', t.model_text));
      const obs=t.observation;
      if(obs) box.appendChild(observation(obs, t));
      if(t.metrics&&Object.keys(t.metrics).length) box.appendChild(block('metrics', metrics(t.metrics)));
      pane.appendChild(box);
    });
  }
  function fill(filter){
    shown=data.filter(ep=>filter==='all'||(filter==='success')===!!ep.success);
    list.replaceChildren();
    if(!shown.length){
      const none={all:'no episodes',success:'no successes',failure:'no failures'}[filter];
      pane.replaceChildren(el('p','none',none)); list.appendChild(el('p','none',none)); return;
    }
    shown.forEach((ep,i)=>{const b=el('button',ep.success?'ok':'bad',
      '#'+ep.episode+'  seed '+ep.seed+'  '+ep.status+'  r='+ep.reward+'  turns='+ep.num_turns);
      b.addEventListener('click',()=>show(i)); list.appendChild(b);});
    show(0);
  }
  document.querySelectorAll('input[name=filter]').forEach(
    r=>r.addEventListener('change',e=>fill(e.target.value)));
  document.addEventListener('keydown',e=>{
    if(e.key==='ArrowDown'||e.key==='j') show(Math.min(current+1,shown.length-1));
    if(e.key==='ArrowUp'||e.key==='k') show(Math.max(current-1,0));
  });
  fill('all');
})();
"""


def render_report(
    records: Sequence[Mapping[str, Any]], summary: Mapping[str, Any], embed_from: Path | None = None
) -> str:
    """The report page for ``results.jsonl`` records and their summary; with ``embed_from`` (the
    run's folder) its frames are embedded, else linked relative to the page."""
    run = summary.get("run") or {}
    title = f"vlm-envs eval: {run.get('env', '?')} with {run.get('policy', '?')}"
    rewards = [float(r.get("reward") or 0.0) for r in records]
    turns = [float(r.get("num_turns") or 0) for r in records]
    views = [_episode_view(r, embed_from) for r in records]
    data = json.dumps(views, ensure_ascii=False, allow_nan=False)
    data = data.replace("<", "\\u003c")  # nothing in the data can close the script element
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<link rel="icon" href="data:,"><title>{html.escape(title)}</title><style>{_CSS}</style></head>
<body><header><h1>{html.escape(title)}</h1></header><main>
<div class="row">{_summary_html(summary)}
{histogram_svg("episode reward", rewards)}{histogram_svg("turns per episode", turns, integer=True)}</div>
<div class="filters">Show: <label><input type="radio" name="filter" value="all" checked> all</label>
<label><input type="radio" name="filter" value="success"> successes</label>
<label><input type="radio" name="filter" value="failure"> failures</label> (arrow keys move)</div>
<div id="viewer"><nav id="list"></nav><div id="episode"></div></div>
</main><script type="application/json" id="episodes-data">{data}</script>
<script>{_JS}</script></body></html>
"""


def write_report(
    out_dir: str | Path,
    records: Sequence[Mapping[str, Any]],
    summary: Mapping[str, Any],
    mode: str = DEFAULT_REPORT_MODE,
) -> Path:
    """Write ``index.html`` into ``out_dir`` from the frames under ``out_dir/frames``: embedded
    (``self-contained``) or linked (``linked``). The old page is replaced whole or not at all."""
    if mode not in REPORT_MODES:
        raise ValueError(f"report mode {mode!r}: use one of {', '.join(REPORT_MODES)}")
    out = Path(out_dir)
    page = render_report(records, summary, out if mode == "self-contained" else None)
    return write_atomic(out / REPORT_FILE, page)
