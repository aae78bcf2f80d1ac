"""Options (options.py): one clear message per bad value, defaults written once and used by the
command line and the workflow's schema, and the method's constants passed in, not patched."""

import dataclasses
from pathlib import Path

import pytest
import yaml

from gpualign.errors import InputError
from gpualign.options import HELP, INDEX_HELP, TUNING, IndexParams, MapParams, Tuning

REPO = Path(__file__).resolve().parents[1]


def test_params_check_names_the_bad_option():
    with pytest.raises(Exception, match="max_indels=99"):
        MapParams(max_indels=99).check()


@pytest.mark.parametrize("bad, message", [(dict(k=3), "index k=3: must be between 4 and 14, or auto"),
                                          (dict(k=15), "index k=15"), (dict(k="big"), "index k=big"),
                                          (dict(max_occ=0), "index max_occ=0")])
def test_index_params_check_names_the_bad_option(bad, message):
    with pytest.raises(InputError, match=message):
        IndexParams(**bad).check()


def test_tuning_is_not_a_user_option_and_travels_with_the_params():
    assert "tuning" not in MapParams.names()
    p = MapParams(tuning=Tuning(insert_block=24, min_fragments=8))
    assert p.tuning.insert_block == 24 and p.tuning.vote_fraction == TUNING.vote_fraction
    assert dataclasses.replace(p, max_hits=9).tuning == p.tuning
    assert MapParams().tuning == TUNING


def test_schema_defaults_and_help_are_the_options():
    """The workflow's schema repeats no default of its own: each one equals the dataclass's, and every
    option has its help text."""
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())["properties"]
    for section, cls, help_text in (("index", IndexParams, INDEX_HELP), ("align", MapParams, HELP)):
        props = schema[section]["properties"]
        for f in dataclasses.fields(cls):
            if f.name == "tuning":
                continue
            assert props[f.name]["default"] == f.default, (section, f.name)
            assert help_text[f.name], (section, f.name)
