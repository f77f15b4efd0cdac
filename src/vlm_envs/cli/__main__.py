"""``python -m vlm_envs.cli``: the ``vlm-envs`` command."""

import sys

from vlm_envs.cli import main

sys.exit(main())
