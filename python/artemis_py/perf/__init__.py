"""``artemis-py perf``: a STOMP load generator in the spirit of Artemis's ``artemis perf``.

* :mod:`.options`: :class:`PerfOptions` (what to run) and its command-line options.
* :mod:`.worker`: one load-generating process: producers and consumers as Trio tasks on
  :mod:`artemis_py.client` connections, counters in shared memory, histograms at the end.
* :mod:`.runner`: the coordinating process: starts the workers, releases them at one wall-
  clock instant, prints a progress line every second, drains the consumers, gathers results.
* :mod:`.histogram`: HDR histograms (``hdrh``) for latencies, encoded to cross processes.
* :mod:`.report`: the summary text, the JSON document and the optional PNG plot.

``hdrh`` is needed to run a load test; matplotlib only for ``--plot`` (extra ``perf``).
"""

from typing import Final

from artemis_py.perf.options import PerfOptions

__all__ = ["INSTALL_EXTRA", "PerfOptions"]

INSTALL_EXTRA: Final = "pip install 'artemis-py[perf]' (or '.[perf]' from a checkout)"
"""How to get the ``perf`` extra, from a package index or from a source checkout (README)."""
