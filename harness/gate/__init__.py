"""The regression gate: pure functions deciding pass, regression or inconclusive.

`statistics` judges a candidate's repetitions against a baseline's (decide -> Verdict);
`power` measures, on simulated or resampled repetitions, how often that rule calls each outcome;
`compare` judges every configuration of a candidate; `baselines` picks each one's baseline
sample, from pinned repetitions or from the HistoryStore it is handed; `output` formats the
verdict. Nothing here opens a file: the candidate comes from harness.history.from_dir,
and harness.gate_publish writes the verdict out.
"""

from harness.gate.power import OutcomeRates, log_residuals, resample_outcomes, simulate_outcomes
from harness.gate.statistics import GateRule, Outcome, Verdict, between_night_noise, decide, smallest_p_value

__all__ = [
    "GateRule",
    "Outcome",
    "OutcomeRates",
    "Verdict",
    "between_night_noise",
    "decide",
    "log_residuals",
    "resample_outcomes",
    "simulate_outcomes",
    "smallest_p_value",
]
