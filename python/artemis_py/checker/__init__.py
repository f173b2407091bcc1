"""``artemis-py check``: the total-queue checker, a proof a user can run against a cluster.

* :mod:`.history`: :class:`History` (what was sent, receipted, received and acknowledged)
  and its :class:`Verdict` (lost, unexpected, duplicated); also the churn test's counting.
* :mod:`.runner`: :func:`run_check`, producers and consumers on every node, then a drain.

docs/check.md says how to run it and how to read its report.
"""

from artemis_py.checker.history import History, Verdict
from artemis_py.checker.runner import CheckOptions, run_check

__all__ = ["CheckOptions", "History", "Verdict", "run_check"]
