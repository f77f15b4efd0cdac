"""``python -m vlm_envs.testing``: serve the tiny model on SGLang's ``/generate`` until terminated."""

from vlm_envs.testing.server import main

main()
