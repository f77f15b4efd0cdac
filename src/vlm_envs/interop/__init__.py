"""Adapters that let other ecosystems' environment interfaces play vlm-envs envs.

- :mod:`vlm_envs.interop.trl_environment`: TRL's ``GRPOTrainer(environment_factory=...)`` route
  (the ``trl`` extra).
- :mod:`vlm_envs.interop.verifiers`: a ``verifiers.v1`` taskset and env (the ``verifiers`` extra).
- :mod:`vlm_envs.interop.row_options`: a row's ``difficulty`` and ``options`` as reset options (both).

Each module is the only one that knows its library; none is imported here.
"""
