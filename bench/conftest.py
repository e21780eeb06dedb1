"""pytest-benchmark suites; run `pytest bench` (they are not in the default test run).

Each benchmark also checks its output, so `pytest bench --benchmark-disable`
is a quick correctness smoke test of everything the suites touch.

The suites use pyparbench's pytest plugin (pyparbench/pytest_plugin.py):
``ppb_bench`` times prepared kernels in their C++ loops, ``ppb_pinned``
pins and audits their OpenMP teams, ``ppb_threads`` is the thread sweep
(1 and 2 here; ``--ppb-threads 1,2,4,max`` for another), and every saved
run carries the machine fingerprint (``--benchmark-save``, then
``pyparbench compare``).
"""

from __future__ import annotations

from importlib.metadata import entry_points


def _plugin_installed() -> bool:
    return any(ep.value == "pyparbench.pytest_plugin" for ep in entry_points(group="pytest11"))


# An installed pyparbench registers the plugin itself (entry point pytest11);
# a source checkout on PYTHONPATH does not, so load it here. Loading it twice
# would be an error.
pytest_plugins = [] if _plugin_installed() else ["pyparbench.pytest_plugin"]
