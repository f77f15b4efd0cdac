"""``one_line``: the one way an error becomes the line the CLI prints, the server answers and a failed
episode records."""

from __future__ import annotations

import pydantic
import pytest

from vlm_envs.errors import one_line


class Grid(pydantic.BaseModel):
    size: int


def test_a_pydantic_error_is_one_line_without_its_pointer_to_the_docs() -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        Grid(size="huge")
    assert "\n" in str(caught.value) and "errors.pydantic.dev" in str(caught.value)
    line = one_line(caught.value)
    assert "\n" not in line and "errors.pydantic.dev" not in line and "size" in line
    assert one_line(caught.value, typed=True).startswith("ValidationError: 1 validation error for Grid ")


def test_typed_names_the_exception_and_an_empty_message_is_its_type() -> None:
    assert one_line(ValueError("bad  value\n\tat  line 3")) == "bad value at line 3"
    assert one_line(ValueError("bad"), typed=True) == "ValueError: bad"
    assert one_line(KeyError()) == one_line(KeyError(), typed=True) == "KeyError"
    assert one_line("a server's\ntext", typed=True) == "a server's text"  # a string has no type to name


def test_the_line_is_cut_at_its_limit() -> None:
    assert one_line(RuntimeError("x" * 1000)) == "x" * 300
    assert one_line(RuntimeError("x" * 1000), 40, typed=True) == "RuntimeError: " + "x" * 26
