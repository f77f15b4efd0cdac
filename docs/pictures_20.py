"""Write a PNG of the first observation of ZoomSearch and ChartCalc (seed 0) and of ZoomSearch's oracle
zoom under docs/. Run: ``PYTHONPATH=src .venv/bin/python docs/pictures_20.py``."""

from __future__ import annotations

from pathlib import Path

from vlm_envs import build_env

DOCS = Path(__file__).parent


def main() -> None:
    zoom = build_env("vlm_envs.envs.zoom_search")
    obs, _ = zoom.reset(seed=0)
    obs.images[0].save(DOCS / "zoom_search.png", optimize=True)
    crop, _, _ = zoom.step(zoom.oracle_response())
    crop.images[0].save(DOCS / "zoom_search_zoom.png", optimize=True)
    chart = build_env("vlm_envs.envs.chart_calc")
    obs, _ = chart.reset(seed=0, options={"kinds": ["grouped_bar"]})
    obs.images[0].save(DOCS / "chart_calc.png", optimize=True)
    for name in ("zoom_search.png", "zoom_search_zoom.png", "chart_calc.png"):
        print(DOCS / name, (DOCS / name).stat().st_size // 1024, "KB")


if __name__ == "__main__":
    main()
