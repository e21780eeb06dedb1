"""Short keys for settings in terminal tables, with the full settings in a legend.

A whole setting ('sync 1x2 library/onednn/openmp compact omp_wait=20000')
does not fit a table row of 80 columns beside its figures. A row shows a
key instead: the name it ran under (a preset, the recommender's choice) or,
for a setting of a sweep, a number ('s1', 's2', ...: one per distinct
setting, whatever row it is in); the legend under the table gives each
key's full setting. A name can stand for other settings on other rows (a
preset resolves per model and machine): its legend entry then lists each
with the rows it holds for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["SettingsLegend", "framework_label"]


def framework_label(item: Mapping[str, Any]) -> str:
    """'torch (script)', or the framework alone when no mode is recorded."""
    return f"{item['framework']} ({item['mode']})" if item.get("mode") else str(item["framework"])


class SettingsLegend:
    """Keys handed out in the order asked; :meth:`lines` is the legend."""

    def __init__(self, prefix: str = "s") -> None:
        self._prefix = prefix
        self._numbered: dict[str, str] = {}  # setting -> its key
        # name -> setting -> the rows ("mlp-512 b1") it holds for, in order
        self._named: dict[str, dict[str, list[str]]] = {}

    def key(self, setting: str, name: str = "", where: str = "") -> str:
        """The key a table shows for ``setting``: ``name`` when it ran under
        one, else the setting's number. ``where`` says which row it is (for
        a name that stands for several settings)."""
        if name:
            rows = self._named.setdefault(name, {}).setdefault(setting, [])
            if where and where not in rows:
                rows.append(where)
            return name
        if setting not in self._numbered:
            self._numbered[setting] = f"{self._prefix}{len(self._numbered) + 1}"
        return self._numbered[setting]

    def lines(self) -> list[str]:
        """One line per key: 'intel: sync 1x2 ...', or, for a name that stands
        for several settings, a line per setting with its rows (one line
        each, so a narrow terminal never splits a setting across two)."""
        out = []
        for name, settings in self._named.items():
            if len(settings) == 1:
                out.append(f"{name}: {next(iter(settings))}")
            else:
                out += [f"{name}: {s} ({', '.join(rows)})" if rows else f"{name}: {s}"
                        for s, rows in settings.items()]
        out += [f"{key}: {setting}" for setting, key in self._numbered.items()]
        return out
