"""`groupcoord groups list`'s options and output, without a service: bad values are refused before anything is
asked, names are Kafka's in any case, the table is plain aligned text and the last line counts every match."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from groupcoord.actors.tools.cli import main
from groupcoord.actors.tools.cli_group_list import GROUP_STATES, GROUP_TYPES, parse_names, plain_table, summary


def refused(*args: str) -> str:
    """Run `groups list` with `args` (no service runs in this namespace); it must fail as a usage error."""
    result = CliRunner().invoke(main, ["--namespace", "gc-test-no-such-service", "groups", "list", *args])
    assert result.exit_code == 2, result.output
    return result.output


def test_states_and_types_are_kafkas_names_in_any_case_repeated_or_comma_separated():
    assert parse_names(["stable,EMPTY", " reconciling "], GROUP_STATES, "state") == ("Stable", "Empty", "Reconciling")
    assert parse_names(["Consumer", "classic,consumer"], GROUP_TYPES, "type") == ("consumer", "classic")
    assert parse_names([], GROUP_STATES, "state") == ()


@pytest.mark.parametrize("bad", ["Rebalancing", "Stable,", ""])
def test_an_unknown_or_empty_state_is_refused_naming_the_valid_ones(bad):
    with pytest.raises(click.BadParameter, match="valid states are PreparingRebalance, CompletingRebalance, Stable"):
        parse_names([bad], GROUP_STATES, "state")


def test_bad_values_fail_before_the_service_is_asked():
    assert "'Rebalancing' is not a group state" in refused("--state", "Stable,Rebalancing")
    assert "valid types are classic, consumer, share, streams" in refused("--type", "simple")
    assert "--page-size" in refused("--page-size", "0")
    assert "--page" in refused("--page", "-1")
    assert "leave out --page" in refused("--all", "--page", "2")


def test_the_table_is_plain_aligned_text_with_a_dash_for_an_empty_cell():
    assert plain_table(("GROUP", "STATE"), [("a-long-group", "Empty"), ("b", "")]).splitlines() == [
        "GROUP         STATE",
        "a-long-group  Empty",
        "b             -",
    ]


def test_the_last_line_counts_every_match_and_says_where_the_next_page_is():
    assert summary(100_000, 0, 1000, 1, 100, (), ()) == \
        "100,000 groups: showing 1-1,000, page 1 of 100 (--page 2 for more)"
    assert summary(2500, 2000, 500, 3, 3, ("Empty", "Stable"), ("classic",)) == \
        "2,500 groups in state Empty or Stable of type classic: showing 2,001-2,500, page 3 of 3"
    assert summary(1, 0, 1, 1, 1, (), ("consumer",)) == "1 group of type consumer: showing 1-1"
    assert summary(0, 0, 0, 1, 1, ("Dead",), ()) == "0 groups in state Dead"
