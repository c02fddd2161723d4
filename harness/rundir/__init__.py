"""The run directory's format, written by the driver and read by every consumer.

`records` defines the tables a run writes (their parquet schemas), `manifest` what the
run says about itself (manifest.json), `accounting` checks the rows against the plan,
and `reader` loads a finished run directory back (RunData) and finds the run
directories under a path. Nothing is re-exported: the driver imports `records` and
`manifest` without the reader's pandas.
"""
