"""The regression gate: pure statistics deciding pass, regression or inconclusive."""
