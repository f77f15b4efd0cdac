"""The README's first episode, which every tier test plays: this config and seed, won by three valid moves."""

CONFIG = {"grid_size": [6, 6], "num_boxes": 1}
SEED = 3
WIN = "<answer>Down, Left, Down</answer>"
