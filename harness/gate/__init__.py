"""The regression gate: pure functions deciding pass, regression or inconclusive.

`rule` holds the gate's parameters and their defaults (light: the CLI reads it to build
its options); `statistics` judges a candidate's repetitions against a baseline's (decide -> Verdict);
`power` measures, on simulated or resampled repetitions, how often that rule calls each outcome;
`compare` judges every configuration of a candidate; `baselines` picks each one's baseline
sample, from pinned repetitions or from the HistoryStore it is handed; `output` formats the
verdict. Nothing here opens a file: the candidate comes from harness.history.from_dir,
and harness.cli.gate_publish writes the verdict out.
"""
