"""The regression gate's statistics: pure functions deciding pass, regression or inconclusive.

`statistics` judges a candidate's trials against a baseline's (decide -> Verdict);
`power` measures, on simulated or resampled trials, how often that rule calls each outcome.
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
