"""Seeding and drawing of name-proxy variants (tasks/names/draw.py; Obscured but Not Erased §4.1.1, Appendix C):
 the paper's sub-seeds, one stream per example and sub-seed, one example's three
variants pinned, a repeated draw drawn again from its own stream, one era and one gender per pair, every name of
a pool reachable. Fast: a synthetic table, no stage run."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest

from pbbq.tasks.names.draw import (
    ERAS_BY_AGE_BAND,
    Drawn,
    PairRequest,
    TooFewPairs,
    apart,
    draw_pair,
    draw_variants,
    example_seed,
    example_stream,
    gender_choices,
    name_pools,
    pair_eras,
    possible_pairs,
    sub_seeds,
)
from pbbq.tasks.names.tables import ERAS, GENDERS

SEEDS = [7271, 861, 5391]
NEUTRAL_PAIR = PairRequest("fa", ("A", "B"), ("neutral", "neutral"), ERAS)


def _table() -> pd.DataFrame:
    """Groups A and B, two names per gender and era, each name telling its group, gender and era: 'Af-pre1970-0'."""
    rows = [
        ("fa", group, gender, era, f"{group}{gender[0]}-{era}-{k}")
        for group in ("A", "B")
        for gender in GENDERS
        for era in ERAS
        for k in range(2)
    ]
    return pd.DataFrame(rows, columns=["lang", "group", "gender", "era", "name"])


@pytest.fixture
def pools() -> dict[tuple[str, str, str, str], tuple[str, ...]]:
    """Function-scoped on purpose: mutmut runs a function's mutants against the tests that called it, and a
    module-scoped fixture calls name_pools in the first test only."""
    return name_pools(_table())


def _era(name: str) -> str:
    return name.split("-", 1)[1].rsplit("-", 1)[0]


def _gender(name: str) -> str:
    return {"f": "female", "m": "male"}[name[1]]


# --- seeds ----------------------------------------------------------------------------------------------------


def test_sub_seeds_are_the_papers() -> None:
    state = np.random.get_state()
    np.random.seed(42)
    global_draw = np.random.randint(1, 10000, 3).tolist()
    np.random.set_state(state)
    assert sub_seeds(42, 3) == global_draw == SEEDS
    assert np.random.get_state()[1].tolist() == state[1].tolist()  # numpy's global state is left alone
    assert sub_seeds(42, 5)[:3] == SEEDS
    assert sub_seeds(7, 3) != SEEDS


def test_each_example_and_sub_seed_has_its_own_stream() -> None:
    digest = int(hashlib.sha256(b"DOM-01-T2-abc").hexdigest()[:16], 16)
    assert example_seed("DOM-01-T2-abc") == digest
    expected = np.random.default_rng([861, digest]).random(4)
    assert np.array_equal(example_stream(861, "DOM-01-T2-abc").random(4), expected)
    assert not np.array_equal(example_stream(7271, "DOM-01-T2-abc").random(4), expected)
    assert not np.array_equal(example_stream(861, "DOM-01-T2-abd").random(4), expected)


# --- one example pinned ---------------------------------------------------------------------------------------


def test_one_examples_three_variants_are_pinned(pools: dict) -> None:
    taken: set[tuple[str, str]] = set()
    drawn = draw_variants(pools, NEUTRAL_PAIR, "T-1", SEEDS, taken)
    assert drawn == [
        (Drawn("pre1970", ("Af-pre1970-0", "Bf-pre1970-1")), 1),
        (Drawn("pre1970", ("Am-pre1970-1", "Bm-pre1970-0")), 1),
        (Drawn("1970-1995", ("Am-1970-1995-1", "Bm-1970-1995-1")), 1),
    ]
    assert taken == {result.names for result, _ in drawn}


def test_the_first_variant_follows_the_documented_steps(pools: dict) -> None:
    """The module docstring's steps written out by hand: era, gender, first name, second name, in that order."""
    rng = np.random.default_rng([7271, int(hashlib.sha256(b"T-1").hexdigest()[:16], 16)])
    era = ERAS[int(rng.integers(3))]
    gender = GENDERS[int(rng.integers(2))]
    first_pool = sorted(f"A{gender[0]}-{era}-{k}" for k in range(2))
    first = first_pool[int(rng.integers(2))]
    second_pool = sorted(f"B{gender[0]}-{era}-{k}" for k in range(2))
    second = second_pool[int(rng.integers(2))]
    assert draw_pair(pools, NEUTRAL_PAIR, example_stream(7271, "T-1")) == Drawn(era, (first, second))


def test_a_repeated_draw_is_drawn_again_from_its_own_stream(pools: dict) -> None:
    request = PairRequest("fa", ("A", "B"), ("male", "male"), ("pre1970",))  # 4 possible pairs
    taken: set[tuple[str, str]] = set()
    drawn = draw_variants(pools, request, "T-2", SEEDS, taken)
    assert drawn == [
        (Drawn("pre1970", ("Am-pre1970-1", "Bm-pre1970-1")), 1),
        (Drawn("pre1970", ("Am-pre1970-0", "Bm-pre1970-0")), 1),
        (Drawn("pre1970", ("Am-pre1970-1", "Bm-pre1970-0")), 2),
    ]
    stream = example_stream(5391, "T-2")  # the third variant's stream: its first draw repeats the first variant
    first_try, second_try = draw_pair(pools, request, stream), draw_pair(pools, request, stream)
    assert first_try.names == drawn[0][0].names and second_try == drawn[2][0]


def test_taken_pairs_of_other_examples_are_avoided(pools: dict) -> None:
    request = PairRequest("fa", ("A", "B"), ("male", "male"), ("pre1970",))
    taken = {("Am-pre1970-1", "Bm-pre1970-1"), ("Am-pre1970-1", "Bm-pre1970-0"), ("Am-pre1970-0", "Bm-pre1970-1")}
    assert possible_pairs(pools, request) - taken == {("Am-pre1970-0", "Bm-pre1970-0")}
    drawn = draw_variants(pools, request, "T-3", [7271], taken)
    assert drawn[0][0].names == ("Am-pre1970-0", "Bm-pre1970-0") and drawn[0][1] > 1
    assert len(taken) == 4
    with pytest.raises(TooFewPairs, match="0 name pair\\(s\\) left for 1 variants"):
        draw_variants(pools, request, "T-4", [7271], taken)


def test_too_few_free_pairs_take_nothing(pools: dict) -> None:
    request = PairRequest("fa", ("A", "B"), ("male", "male"), ("pre1970",))
    taken = {("Am-pre1970-1", "Bm-pre1970-1"), ("Am-pre1970-1", "Bm-pre1970-0")}
    with pytest.raises(TooFewPairs) as error:
        draw_variants(pools, request, "T-3", SEEDS, taken)
    assert (error.value.free, error.value.wanted) == (2, 3) and len(taken) == 2


# --- eras, genders and pools ----------------------------------------------------------------------------------


def test_a_pair_shares_one_era_and_one_gender_and_the_variants_differ(pools: dict) -> None:
    eras, genders = set(), set()
    for i in range(300):
        drawn = draw_variants(pools, NEUTRAL_PAIR, f"E-{i}", SEEDS, set())
        assert len({result.names for result, _ in drawn}) == 3
        for result, _ in drawn:
            first, second = result.names
            assert first.startswith("A") and second.startswith("B")
            assert _era(first) == _era(second) == result.era
            assert _gender(first) == _gender(second)
            eras.add(result.era)
            genders.add(_gender(first))
    assert eras == set(ERAS) and genders == set(GENDERS)


@pytest.mark.parametrize(
    ("genders", "expected"),
    [
        (("male", "neutral"), [("male", "male")]),
        (("female", "neutral"), [("female", "female")]),
        (("neutral", "female"), [("female", "female")]),
        (("neutral", "male"), [("male", "male")]),
        (("female", "male"), [("female", "male")]),
        (("neutral", "neutral"), [("female", "female"), ("male", "male")]),
    ],
)
def test_an_entity_without_gender_takes_its_partners(genders: tuple[str, str], expected: list) -> None:
    assert gender_choices(genders) == expected


def test_known_genders_are_kept_even_when_they_differ(pools: dict) -> None:
    request = PairRequest("fa", ("A", "B"), ("female", "male"), ERAS)
    for i in range(50):
        result = draw_pair(pools, request, example_stream(7271, f"G-{i}"))
        assert (_gender(result.names[0]), _gender(result.names[1])) == ("female", "male")


def test_every_name_of_a_pool_can_be_drawn(pools: dict) -> None:
    firsts, seconds = set(), set()
    for i in range(400):
        first, second = draw_pair(pools, NEUTRAL_PAIR, example_stream(861, f"P-{i}")).names
        firsts.add(first)
        seconds.add(second)
    assert firsts == set(_table().query("group == 'A'")["name"])
    assert seconds == set(_table().query("group == 'B'")["name"])


def test_two_entities_never_share_a_name_even_from_overlapping_pools() -> None:
    table = pd.DataFrame(
        [("fa", group, "male", "pre1970", name) for group in ("A", "B") for name in ("x", "y")],
        columns=["lang", "group", "gender", "era", "name"],
    )
    pools = name_pools(table)
    request = PairRequest("fa", ("A", "B"), ("male", "male"), ("pre1970",))
    assert possible_pairs(pools, request) == {("x", "y"), ("y", "x")}
    pairs = {draw_pair(pools, request, example_stream(s, f"E{i}")).names for i in range(100) for s in SEEDS}
    assert pairs == {("x", "y"), ("y", "x")}


def test_pools_are_sorted_and_a_name_of_several_eras_is_in_each() -> None:
    table = pd.DataFrame(
        [("fa", "A", "male", "pre1970;1970-1995", "z"), ("fa", "A", "male", "pre1970", "b")],
        columns=["lang", "group", "gender", "era", "name"],
    )
    pools = name_pools(table)
    assert pools == {("fa", "A", "male", "pre1970"): ("b", "z"), ("fa", "A", "male", "1970-1995"): ("z",)}
    assert name_pools(table.iloc[::-1]) == pools


def test_possible_pairs_count_every_era_and_gender(pools: dict) -> None:
    assert len(possible_pairs(pools, NEUTRAL_PAIR)) == 3 * 2 * 2 * 2
    assert len(possible_pairs(pools, PairRequest("fa", ("A", "B"), ("female", "neutral"), ERAS))) == 3 * 2 * 2
    assert len(possible_pairs(pools, PairRequest("fa", ("A", "B"), ("male", "male"), ("post1995",)))) == 4


@pytest.mark.parametrize(
    ("bands", "eras"),
    [
        (("none", "none"), ERAS),
        (("adult", "none"), ERAS),
        (("old", "none"), ("pre1970",)),
        (("young", "middle"), ("1970-1995",)),
        (("young", "youth"), ("1970-1995", "post1995")),
        (("teen", "child"), ("post1995",)),
        (("middle", "old"), ("pre1970",)),
        (("old", "teen"), ()),
    ],
)
def test_age_bands_narrow_the_eras(bands: tuple[str, str], eras: tuple[str, ...]) -> None:
    assert pair_eras(bands) == eras


def test_a_draw_keeps_to_the_allowed_eras(pools: dict) -> None:
    request = PairRequest("fa", ("A", "B"), ("neutral", "neutral"), pair_eras(("young", "none")))
    drawn = {draw_pair(pools, request, example_stream(7271, f"Y-{i}")).era for i in range(100)}
    assert drawn == {"1970-1995", "post1995"}
    assert set(ERAS_BY_AGE_BAND) == {"child", "teen", "youth", "young", "middle", "old", "adult", "none"}


def test_a_name_that_is_part_of_the_other_is_never_its_partner() -> None:
    """'حسین' inside 'خادم‌حسین' would let a string match of one option find the other: such names are not a pair,
    whichever comes first; a name is not its own partner either."""
    assert not apart("حسین", "خادم‌حسین") and not apart("خادم‌حسین", "حسین") and not apart("حسین", "حسین")
    assert apart("حسین", "حسن") and apart("علی", "رضا")
    table = pd.DataFrame(
        [("fa", "A", "male", "pre1970", "حسین"), *(("fa", "B", "male", "pre1970", n) for n in ("خادم‌حسین", "رضا"))],
        columns=["lang", "group", "gender", "era", "name"],
    )
    pools = name_pools(table)
    request = PairRequest("fa", ("A", "B"), ("male", "male"), ("pre1970",))
    assert possible_pairs(pools, request) == {("حسین", "رضا")}
    assert {draw_pair(pools, request, example_stream(s, f"H{i}")).names for i in range(20) for s in SEEDS} == {
        ("حسین", "رضا")
    }


def test_exactly_as_many_free_pairs_as_variants_is_enough(pools: dict) -> None:
    request = PairRequest("fa", ("A", "B"), ("male", "male"), ("pre1970",))  # 4 possible pairs
    taken = {("Am-pre1970-1", "Bm-pre1970-1")}
    drawn = draw_variants(pools, request, "T-5", SEEDS, taken)
    assert {result.names for result, _ in drawn} == possible_pairs(pools, request) - {("Am-pre1970-1", "Bm-pre1970-1")}
    assert len(taken) == 4


def test_sub_seeds_are_appendix_cs_draw_for_any_number_of_them() -> None:
    """np.random.seed(seed); np.random.randint(1, 10000, n): every sub-seed in 1..9999 (randint's high is left out),
    for as many as asked (50,000 draws reach the stream's rejected values, where another range would differ)."""
    state = np.random.get_state()
    np.random.seed(42)
    global_draw = np.random.randint(1, 10000, 50_000).tolist()
    np.random.set_state(state)
    many = sub_seeds(42, 50_000)
    assert many == global_draw and min(many) == 1 and max(many) == 9999


def test_possible_pairs_take_each_entitys_own_gender(pools: dict) -> None:
    request = PairRequest("fa", ("A", "B"), ("female", "male"), ERAS)
    pairs = possible_pairs(pools, request)
    assert len(pairs) == 3 * 2 * 2
    assert all(_gender(first) == "female" and _gender(second) == "male" for first, second in pairs)


def test_a_gender_or_era_without_names_gives_no_pair() -> None:
    table = pd.DataFrame(
        [("fa", group, "male", "pre1970", f"{group}m") for group in ("A", "B")],
        columns=["lang", "group", "gender", "era", "name"],
    )
    pools = name_pools(table)
    assert possible_pairs(pools, PairRequest("fa", ("A", "B"), ("neutral", "neutral"), ERAS)) == {("Am", "Bm")}
    assert possible_pairs(pools, PairRequest("fa", ("A", "B"), ("female", "female"), ERAS)) == set()
    with pytest.raises(TooFewPairs) as error:
        draw_variants(pools, PairRequest("fa", ("A", "B"), ("female", "male"), ERAS), "T-6", SEEDS, set())
    assert (error.value.free, error.value.wanted) == (0, 3)
