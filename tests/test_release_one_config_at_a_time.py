"""The release's data part is made one config at a time: each config's frame is cut from the stacked examples when
its turn comes and is gone before the next one is cut, so the peak is one config's, not every config's."""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping

import pandas as pd
import pytest

from pbbq.tasks.publish.release import data_part, split_configs
from tests.release_support import make_configs


class Watched(Mapping[str, pd.DataFrame]):
    """``configs`` as :func:`data_part` reads them, refusing a frame while one handed out before is alive."""

    def __init__(self, configs: Mapping[str, pd.DataFrame]) -> None:
        self.configs = configs
        self.handed: list[tuple[str, weakref.ref[pd.DataFrame]]] = []

    def __getitem__(self, name: str) -> pd.DataFrame:
        alive = [earlier for earlier, frame in self.handed if frame() is not None]
        assert not alive, f"the frame of {alive} is still held while {name!r} is taken"
        frame = self.configs[name]
        self.handed.append((name, weakref.ref(frame)))
        return frame

    def __iter__(self) -> Iterator[str]:
        return iter(self.configs)

    def __len__(self) -> int:
        return len(self.configs)


def _examples() -> pd.DataFrame:
    return pd.concat(make_configs().values(), ignore_index=True)


def test_release_data_holds_one_config_frame_at_a_time() -> None:
    configs = Watched(split_configs(_examples()))
    data = data_part(configs)
    assert [name for name, _ in configs.handed] == ["fa", "fa-names", "en"]  # each taken once, in release order
    assert [info.name for info in data.infos] == ["fa", "fa-names", "en"]


def test_split_configs_cuts_each_frame_when_asked_and_names_the_configs_without_copying() -> None:
    examples = _examples()
    configs = split_configs(examples, ("fa", "en-names"))
    assert (
        list(configs) == ["fa", "en-names", "fa-names", "en"] and len(configs) == 4
    )  # as given, then a release's order
    assert "en-names" in configs and "ur" not in configs
    first, again = configs["fa"], configs["fa"]
    assert first is not again and first.equals(again)  # cut afresh on each access: the mapping keeps no copy
    assert configs["en-names"].empty and list(configs["en-names"].columns) == list(examples.columns)
    with pytest.raises(KeyError):
        configs["ur"]
