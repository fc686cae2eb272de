"""Findings name the user's lines, whatever earlier rules did to the lines."""

from __future__ import annotations

from accel_migrate.codemod.linemap import LineMap


def test_lines_shifted_by_an_inserted_import() -> None:
    original = "a\nprint(1)\nprint(2)\nb\n"
    current = "import accel\na\naccel.print(1)\naccel.print(2)\nb\n"
    line_map = LineMap(original, current)
    assert [line_map.original(n) for n in range(2, 6)] == [1, 2, 3, 4]


def test_a_merged_block_maps_to_the_line_most_like_it() -> None:
    """``with open(p) as f: torch.save(...)`` became one ``accel.save`` line: a
    finding on the ``state_dict()`` inside it belongs to the ``torch.save`` line,
    not to the ``with`` that starts the block."""
    original = (
        "a\nif x:\n    with open(p, 'wb') as f:\n"
        "        torch.save(model.state_dict(), f)\nb\n"
    )
    current = "a\nif x:\n    accel.save(accel.state_dict(model), p)\nb\n"
    line_map = LineMap(original, current)
    assert [line_map.original(n) for n in range(1, 5)] == [1, 2, 4, 5]


def test_a_split_line_maps_every_part_to_it() -> None:
    original = "a\nx = f(1); y = g(2)\nb\n"
    current = "a\nx = f(1)\ny = g(2)\nb\n"
    line_map = LineMap(original, current)
    assert [line_map.original(n) for n in range(1, 5)] == [1, 2, 2, 3]


def test_only_python_line_breaks_count() -> None:
    """A form feed or U+2028 inside a line does not start a new line."""
    original = "a = 1\f\nprint('\u2028')\nb\n"
    current = "import accel\na = 1\f\naccel.print('\u2028')\nb\n"
    line_map = LineMap(original, current)
    assert [line_map.original(n) for n in range(2, 5)] == [1, 2, 3]


def test_a_column_moves_with_the_text_around_it() -> None:
    """``print(x.cuda())`` became ``accel.print(x.cuda())``: a finding on ``x.cuda()``
    is at the user's column 6, not at 12 in the rewritten line."""
    original = "a\nprint(x.cuda())\n"
    current = "import accel\na\naccel.print(x.cuda())\n"
    line_map = LineMap(original, current)
    assert line_map.original_place(3, 12) == (2, 6)
    assert line_map.original_place(2, 0) == (1, 0)


def test_a_column_in_a_merged_block_is_found_in_its_original_line() -> None:
    original = "with open(p, 'wb') as f:\n    torch.save(model.state_dict(), f)\n"
    current = "accel.save(model.state_dict(), p)\n"
    column = current.index("model.state_dict")
    assert LineMap(original, current).original_place(1, column) == (
        2,
        original.splitlines()[1].index("model.state_dict"),
    )


def test_a_column_in_written_text_names_where_the_edit_starts() -> None:
    """``scaler.scale(loss).backward()`` became ``accel.backward(scaler.scale(loss))``:
    the new call starts where the user's expression did."""
    original = "    scaler.scale(loss).backward()\n"
    current = "    accel.backward(scaler.scale(loss))\n"
    assert LineMap(original, current).original_place(1, 4) == (1, 4)
