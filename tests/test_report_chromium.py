"""The eval report opened in headless Chromium (Debian's ``chromium``), driven over the DevTools protocol.

In CI (``CI`` set) a missing browser fails the test; locally the test is skipped with a reason that
says what to install, so it never passes silently.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from vlm_envs.eval import EvalConfig, run_eval
from vlm_envs.testing.server import stop_process

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
    "--window-size=1280,1600",
]


def _chromium() -> str:
    path = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if path:
        return path
    message = (
        f"Chromium is missing ({CHROMIUM} not found): install Debian's package with "
        "`apt-get update && apt-get install -y chromium` to run the report rendering test"
    )
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


class _DevTools:
    """A minimal DevTools protocol session on one page target."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        await self.ws.send_str(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads((await self.ws.receive(timeout=30)).data)
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    async def wait_for(self, method: str, timeout: float = 30) -> None:
        if any(e.get("method") == method for e in self.events):
            return
        while True:
            msg = json.loads((await self.ws.receive(timeout=timeout)).data)
            self.events.append(msg)
            if msg.get("method") == method:
                return

    def console_errors(self) -> list[str]:
        errors = []
        for e in self.events:
            p = e.get("params", {})
            if e.get("method") == "Runtime.exceptionThrown":
                errors.append(json.dumps(p.get("exceptionDetails", {}))[:500])
            elif e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                errors.append(json.dumps(p.get("args", []))[:500])
            elif e.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                errors.append(p["entry"].get("text", ""))
        return errors


#: Every pair of a histogram's title and a label that overlap, from their bounding boxes as rendered.
LAYOUT_JS = """
function overlaps() {
  const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  const found = [];
  document.querySelectorAll('svg.hist').forEach(svg => {
    const title = svg.querySelector('text.t').getBoundingClientRect();
    svg.querySelectorAll('text:not(.t)').forEach(label => {
      if (hit(title, label.getBoundingClientRect())) found.push(label.textContent);
    });
  });
  return found;
}
"""
#: What each filter shows: the episode pane's text and how many episodes the list holds.
FILTER_JS = """(() => {
  const shown = {};
  for (const value of ['failure', 'success', 'all']) {
    const radio = document.querySelector('input[name=filter][value=' + value + ']');
    radio.checked = true;
    radio.dispatchEvent(new Event('change'));
    const pane = document.getElementById('episode');
    const buttons = document.querySelectorAll('#list button').length;
    shown[value] = {pane: pane.textContent.trim().slice(0, 40), buttons: buttons};
  }
  return JSON.stringify(shown);
})()"""


async def _inspect(browser: subprocess.Popen, page_url: str, screenshot: Path) -> dict[str, Any]:
    assert browser.stderr is not None
    port = None
    loop = asyncio.get_running_loop()
    for _ in range(200):
        line = await loop.run_in_executor(None, browser.stderr.readline)
        found = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
        if found:
            port = int(found.group(1))
            break
    assert port, "chromium did not print its DevTools port"
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/json/list") as resp:
            targets = await resp.json(content_type=None)
        page = next(t for t in targets if t["type"] == "page")
        async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            dt = _DevTools(ws)
            for domain in ("Page", "Runtime", "Log"):
                await dt.call(f"{domain}.enable")
            await dt.call("Page.navigate", url=page_url)
            await dt.wait_for("Page.loadEventFired")
            check = """(() => {
                const imgs = Array.from(document.querySelectorAll('#episode .turn img'));
                return JSON.stringify({
                    turns: document.querySelectorAll('#episode .turn').length,
                    images: imgs.length,
                    loaded: imgs.filter(i => i.complete && i.naturalWidth > 0).length,
                    episodes: document.querySelectorAll('#list button').length,
                    svgs: document.querySelectorAll('svg.hist rect').length,
                    model: Array.from(document.querySelectorAll('#episode pre')).map(p => p.textContent),
                    injected: document.querySelectorAll('#episode b.injected').length,
                    summary: document.querySelector('table.summary').textContent,
                    overlaps: overlaps(),
                });
            })()"""
            result = await dt.call("Runtime.evaluate", expression=LAYOUT_JS + check, returnByValue=True)
            filtered = await dt.call("Runtime.evaluate", expression=FILTER_JS, returnByValue=True)
            shot = await dt.call("Page.captureScreenshot", format="png")
            screenshot.write_bytes(base64.b64decode(shot["data"]))
            await asyncio.sleep(0.2)  # let late console events arrive
            await dt.call("Runtime.evaluate", expression="1")
            seen = json.loads(result["result"]["value"])
            return {
                **seen,
                "filtered": json.loads(filtered["result"]["value"]),
                "errors": dt.console_errors(),
            }


def test_report_renders_in_chromium_with_images_and_no_console_errors(tmp_path: Path) -> None:
    chromium = _chromium()
    out = tmp_path / "run"
    run_eval(EvalConfig(env="sokoban", policy="solver", n=4, out=out, concurrency=2))
    # a hostile model text must stay text: put one into the first episode's record and re-render
    from vlm_envs.eval.runner import RESULTS, read_results
    from vlm_envs.eval.summary import summarize
    from vlm_envs.report import write_report

    records = read_results(out / RESULTS)
    records.sort(key=lambda r: r["episode"])
    hostile = '</script><b class="injected">x</b><img src=x onerror="console.error(1)">'
    records[0]["turns"][1]["model_text"] = hostile
    write_report(out, records, summarize(records, json.loads((out / "run.json").read_text())))

    profile = tmp_path / "profile"
    browser = subprocess.Popen(
        [chromium, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    screenshot = tmp_path / "report.png"
    alone = tmp_path / "mailed" / "report.html"  # the self-contained page, copied without frames/
    alone.parent.mkdir()
    shutil.copy(out / "index.html", alone)
    try:
        seen = asyncio.run(_inspect(browser, alone.as_uri(), screenshot))
    finally:
        stop_process(browser)
    assert seen["errors"] == []
    assert seen["episodes"] == 4
    assert seen["svgs"] >= 2
    # the first episode's viewer: every turn shows the board, and each image file loaded
    assert seen["turns"] >= 2
    assert seen["images"] == seen["turns"]
    assert seen["loaded"] == seen["images"]
    assert hostile in seen["model"]
    assert seen["injected"] == 0
    assert screenshot.stat().st_size > 10_000
    # layout: no bar label overlaps its chart's title; an empty filter says so; unknown tokens say so
    assert seen["overlaps"] == []
    assert seen["filtered"]["failure"] == {"pane": "no failures", "buttons": 0}
    assert seen["filtered"]["success"]["buttons"] == 4 and seen["filtered"]["all"]["buttons"] == 4
    assert seen["filtered"]["success"]["pane"].startswith("Episode 0")
    assert "mean tokensunknown" in seen["summary"] and "mean tokens-" not in seen["summary"]
