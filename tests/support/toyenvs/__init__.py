"""Toy envs for the foundation tests, importable as a user package would be."""
