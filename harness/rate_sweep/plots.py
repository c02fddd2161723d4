"""The rate sweep's figures, as PNG bytes (matplotlib's Figure directly, as harness.report.plots)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from harness.rate_sweep.point import RatePoint
from harness.report.plots import SYSTEM_COLORS, to_png

# (attribute, panel title) of the latency panels, headline first.
LATENCY_PANELS = (
    ("e2e_p50_s", "p50 E2E (s)"), ("e2e_p99_s", "p99 E2E (s)"), ("ttft_p50_s", "p50 TTFT (s)"),
    ("ttft_p99_s", "p99 TTFT (s)"), ("normalized_at_fit_speed_s", "p50 E2E per output token,\nat the fit's speed (s)"),
    ("queue_wait_p50_s", "p50 queue wait (s)"),
)


def latency_curves_plot(curves: Mapping[str, Sequence[RatePoint]], knees: Mapping[str, float | None],
                        targets: Mapping[str, float]) -> bytes:
    """p50/p99 E2E and TTFT against offered rate, one line per system; hollow markers where the queue grew.

    The p50 E2E panel carries each run's 95% interval and the prediction (dashed); the panel the knee is read
    from, E2E per output token at the step cost's speed, a dotted line at each knee. `targets` maps a panel's
    attribute to its SLO target, drawn as a grey dashed line.
    """
    fig = Figure(figsize=(10, 10))
    axes = fig.subplots(3, 2, sharex=True).ravel()
    for ax, (attribute, label) in zip(axes, LATENCY_PANELS, strict=True):
        drawn = False
        for system, points in curves.items():
            ordered = sorted(points, key=lambda point: point.offered_rate)
            rates = np.array([point.offered_rate for point in ordered])
            values = np.array([getattr(point, attribute) for point in ordered], dtype=float)
            drawn = drawn or bool((values > 0).any())
            color = SYSTEM_COLORS.get(system, "black")
            ax.plot(rates, values, color=color, label=system)
            stable = np.array([point.keeps_up for point in ordered], dtype=bool)
            ax.scatter(rates[stable], values[stable], color=color, zorder=3)
            ax.scatter(rates[~stable], values[~stable], facecolors="white", edgecolors=color, zorder=3)
            if attribute == "e2e_p50_s":
                low = values - np.array([point.e2e_p50_low_s for point in ordered])
                high = np.array([point.e2e_p50_high_s for point in ordered]) - values
                ax.errorbar(rates, values, yerr=np.vstack([low, high]), fmt="none", ecolor=color, capsize=3)
                predicted = np.array([point.predicted_e2e_p50_s for point in ordered])
                if np.isfinite(predicted).any():
                    ax.plot(rates, predicted, color=color, linestyle="--", alpha=0.8, label=f"{system} predicted")
            knee = knees.get(system)
            if attribute == "normalized_at_fit_speed_s" and knee is not None:
                ax.axvline(knee, color=color, linestyle=":", alpha=0.8)
        if attribute in targets:
            ax.axhline(targets[attribute], color="grey", linestyle="--", linewidth=1, label="SLO target")
            ax.legend(fontsize="small")
        if drawn:
            ax.set_yscale("log")
        else:  # queue waits come from the engine step log, which a server batchbench did not launch does not keep
            ax.text(0.5, 0.5, "not measured", ha="center", va="center", transform=ax.transAxes, color="grey")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    for ax in axes[4:]:
        ax.set_xlabel("offered rate (requests/s)")
    axes[0].legend(fontsize="small")
    fig.suptitle("Latency against offered rate (hollow: the queue grew for the whole run; dashed: predicted;"
                 " dotted: knee)")
    return to_png(fig)
