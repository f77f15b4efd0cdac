"""Environments shipped with vlm-envs: one module or package per env."""
