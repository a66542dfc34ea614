"""A build configuration is checked by name, type and range when it loads: one line naming the file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from pbbq.flows.cli import main
from pbbq.flows.config import ConfigError, load_config


def _config(sample_copy: Path, text: str) -> Path:
    path = sample_copy / "configs" / "sample.toml"
    path.write_text(path.read_text(encoding="utf-8") + "\n" + text + "\n", encoding="utf-8")
    return path


def _replace(sample_copy: Path, old: str, new: str) -> Path:
    path = sample_copy / "configs" / "sample.toml"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("[kappa_gate]", "[kapa_gate]", "unknown section(s) or key(s) kapa_gate"),
        ("threshold = 0.60", 'threshold = "abc"', "[survey_filter] threshold = 'abc' is not float"),
        ("threshold = 0.60", "threshold = 1.5", "[survey_filter] threshold = 1.5 is outside 0 … 1"),
        ("max_attempts = 3", "max_attempts = 0", "[disambiguate] max_attempts = 0 is outside 1 … 20"),
        ("n_seeds = 3", "n_seeds = 0", "[names] n_seeds = 0 is outside 1 … 100"),
        ("n_seeds = 3", "n_seeds = 2.5", "[names] n_seeds = 2.5 is not int"),
        ("gender_llm = false", 'gender_llm = "no"', "[names] gender_llm = 'no' is not bool"),
        ("min_kappa = 0.2", "min_kappa = -3", "[kappa_gate] min_kappa = -3 is outside -1 … 1"),
        ("[instantiate]\nseed = 42", "[instantiate]\nseed = -1", "[instantiate] seed = -1 is outside 0 …"),
        ("min_chrf = 40.0", "min_chrf = true", "[translate] min_chrf = True is not float"),
    ],
)
def test_a_bad_key_is_named(sample_copy: Path, old: str, new: str, message: str) -> None:
    path = _replace(sample_copy, old, new)
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert message in str(error.value) and str(path) in str(error.value)


def test_an_unknown_top_level_key_is_an_error(sample_copy: Path) -> None:
    path = sample_copy / "configs" / "sample.toml"
    path.write_text("colour = 'blue'\n" + path.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown section"):
        load_config(path)


def test_integers_are_accepted_for_floats(sample_copy: Path) -> None:
    config = load_config(_replace(sample_copy, "min_kappa = 0.2", "min_kappa = 0"))
    assert config.kappa_gate.min_kappa == 0


def test_the_cli_says_one_line_and_exits_1(sample_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _replace(sample_copy, "threshold = 0.60", "threshold = 1.5")
    assert main(["build", "--config", str(path), "--outputs", str(sample_copy / "out")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"pbbq: error: {path}: [survey_filter] threshold = 1.5 is outside 0 … 1"]
    assert not (sample_copy / "out").exists()


@pytest.mark.parametrize("sample", ["configs/sample.toml", "configs/adapt-sample.toml", "configs/sample-ur.toml"])
def test_the_manifest_names_no_file_by_its_absolute_path(sample: str) -> None:
    """Every path a bundled sample's manifest records (the review round's decisions among them) is relative to the
    repository, so its release is the same bytes from any checkout."""

    def paths(value: object) -> list[str]:
        if isinstance(value, dict):
            return [path for item in value.values() for path in paths(item)]
        if isinstance(value, list | tuple):
            return [path for item in value for path in paths(item)]
        return [value] if isinstance(value, str) and Path(value).is_absolute() else []

    parameters = load_config(Path(sample)).parameters()
    assert parameters["review"]["decisions"].startswith("annotations/review/")
    assert paths(parameters) == []
