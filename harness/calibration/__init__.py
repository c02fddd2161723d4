"""A zero-cost streaming endpoint, for calibrating the load client only (never a server).

`null_stream` serves OpenAI-style streamed completions that cost nothing to make, so
what a run against it measures is the client's own ceiling: how many streamed tokens
per second the driver can read, parse and record. `python -m harness.calibration`
(or `batchbench calibration-endpoint`) serves it. `is_calibration_endpoint` tells a
probe's answer from it, so a run against it is marked as a calibration, not a server
measurement.
"""

from harness.calibration.null_stream import (
    CALIBRATION_OWNER,
    DEFAULT_MODEL,
    CompletionEvents,
    NullStreamServer,
    StreamOptions,
    parse_completion,
    serve,
)

__all__ = [
    "CALIBRATION_OWNER",
    "DEFAULT_MODEL",
    "CompletionEvents",
    "NullStreamServer",
    "StreamOptions",
    "parse_completion",
    "serve",
]
