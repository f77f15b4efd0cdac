"""A stand-in for the parts of slime the rollout hook touches (slime itself cannot be installed here).

Importable as ``slime`` only inside the test suite (tests/support is on sys.path). Each module
follows the real contract of the slime module of the same name, field by field.
"""
