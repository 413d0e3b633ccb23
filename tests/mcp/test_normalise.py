"""`normalise_ids`: attachment ids in whatever shape a model writes them
(docs/behaviour.md#attachments)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailui4agents.mcp.normalise import normalise_addresses, normalise_ids

A = "0b6f0f8e-7c55-4d1c-9d0e-0a4e1c7b2f11"
B = "5d1e2a3b-1111-4c2d-8e9f-aa00bb11cc22"

# Ids as the gateway makes them (UUIDs), and other plain tokens a model might pass.
ids = st.one_of(
    st.uuids().map(str),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=40),
)
id_lists = st.lists(ids, max_size=8)


def dedupe(values: list[str]) -> list[str]:
    return list(dict.fromkeys(values))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, []),
        ("", []),
        ("   ", []),
        ([], []),
        ("[]", []),
        (A, [A]),
        (f"  {A}\n", [A]),
        ([A, B], [A, B]),
        ((A, B), [A, B]),
        (json.dumps([A, B]), [A, B]),
        (json.dumps(json.dumps([A, B])), [A, B]),  # encoded twice
        (json.dumps(A), [A]),
        (f"{A},{B}", [A, B]),
        (f"{A}, {B}", [A, B]),
        (f"{A} {B}", [A, B]),
        (f"{A};{B}", [A, B]),
        (f"[{A}, {B}]", [A, B]),  # a list written loosely, not JSON
        (f"['{A}', '{B}']", [A, B]),  # Python's repr of a list
        ([f"{A}, {B}"], [A, B]),
        ([[A], [B]], [A, B]),
        ([json.dumps([A])], [A]),
        ([A, A, B], [A, B]),
        ({"attachment_id": A, "name": "x.txt"}, [A]),  # an upload answer passed back
        ([{"attachment_id": A}, {"id": B}], [A, B]),
        ([A, None, ""], [A]),
    ],
)
def test_every_shape_a_model_writes_becomes_a_plain_list(value: Any, expected: list[str]) -> None:
    assert normalise_ids(value) == expected


def test_six_times_encoded_list_still_comes_out_as_a_list() -> None:
    value: Any = [A, B]
    for _ in range(6):
        value = json.dumps(value)
    assert normalise_ids(value) == [A, B]


@pytest.mark.parametrize("value", [42, 4.2, True, {"name": "no id here"}, [1, 2]])
def test_values_that_hold_no_id_are_refused_with_the_value_named(value: Any) -> None:
    with pytest.raises(ValueError, match="expected"):
        normalise_ids(value)


def test_deeply_nested_json_is_refused_rather_than_recursed_forever() -> None:
    value: Any = A
    for _ in range(40):
        value = [value]
    with pytest.raises(ValueError, match="nested too deeply"):
        normalise_ids(value)


@given(id_lists)
def test_a_list_comes_back_in_order_without_repeats(values: list[str]) -> None:
    assert normalise_ids(values) == dedupe(values)


@given(id_lists, st.integers(min_value=1, max_value=6))
def test_a_json_encoded_list_decodes_however_often_it_was_encoded(
    values: list[str], times: int
) -> None:
    encoded: Any = values
    for _ in range(times):
        encoded = json.dumps(encoded)
    assert normalise_ids(encoded) == dedupe(values)


@given(id_lists, st.sampled_from([",", ", ", " ", "\n", ";", " , "]))
def test_a_separated_string_splits_into_the_same_ids(values: list[str], separator: str) -> None:
    assert normalise_ids(separator.join(values)) == dedupe(values)


@given(ids)
def test_one_id_alone_is_a_list_of_one(value: str) -> None:
    assert normalise_ids(value) == [value]


@given(st.recursive(st.one_of(st.none(), ids), lambda inner: st.lists(inner, max_size=4)))
def test_normalising_twice_changes_nothing_and_leaves_no_separators(value: Any) -> None:
    once = normalise_ids(value)
    assert normalise_ids(once) == once
    assert all(item and not any(c in item for c in " ,;\n[]\"'") for item in once)


def test_uuids_survive_every_shape_exactly() -> None:
    values = [str(uuid.uuid4()) for _ in range(3)]
    shapes = [values, json.dumps(values), ",".join(values), " ".join(values)]
    assert all(normalise_ids(shape) == values for shape in shapes)


def test_addresses_split_on_commas_but_keep_spaces_in_a_workspace_path() -> None:
    assert normalise_addresses("ana@/home/ana/my project.fix, bob@.") == [
        "ana@/home/ana/my project.fix",
        "bob@.",
    ]
    assert normalise_addresses(json.dumps(["ana@.", "bob@."])) == ["ana@.", "bob@."]
    assert normalise_addresses(None) == []
