"""The data of ``starchol report``, as a library (no printing, no figures):

- :mod:`.model`: the exact volume model swept over node counts for every map family
  (``report --model``);
- :mod:`.runs`: run documents (``starchol run --json``) read and checked through
  :class:`~starchol.linalg.record.RunRecord`;
- :mod:`.settle`: a run's byte figures settled against its pair matrices and the exact
  model;
- :mod:`.trace`: execution traces (``starchol run --trace``) read; :mod:`.trace_records`:
  the FxT tool's outputs read and ``trace.json`` written from them; :mod:`.critical_path`:
  the critical path of a trace.

The command line (``jobs/report_*.py``) parses, prints and draws from these.
"""
