"""Turn-level credit from where each turn stood (:mod:`vlm_envs.state_signals`), trainer-neutral.

- :mod:`vlm_envs.credit.gigpo`: GiGPO's advantages (arXiv 2505.10978): an episode's advantage within its
  group, plus each turn's advantage among the group's turns taken from the same state.
- :mod:`vlm_envs.credit.shaping`: potential-based shaping from the distance to the goal (Ng et al. 1999).

The trainer hooks turn their records into these inputs (slime's reward post-process, verl's advantage
estimator); nothing here knows a trainer.
"""
