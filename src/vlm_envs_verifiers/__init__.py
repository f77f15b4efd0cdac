"""The verifiers taskset id of vlm-envs: ``--env.taskset.id vlm-envs-verifiers``.

verifiers' loader imports a taskset id as a top-level module name (a dotted id is looked up under
``verifiers.v1.tasksets`` first and fails there), so this module re-exports
:mod:`vlm_envs.interop.verifiers`'s taskset, env and harness under that name.
"""

from vlm_envs.interop.verifiers import LocalChatHarness, VlmEnvsEnv, VlmEnvsTaskset, load_environment

__all__ = ["LocalChatHarness", "VlmEnvsEnv", "VlmEnvsTaskset", "load_environment"]
