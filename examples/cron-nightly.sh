#!/bin/sh
# A crontab entry for a machine without CI: the suite every night at 02:17, its verdict
# mailed by cron when the exit code is not 0 (1 regression, 3 inconclusive):
#
#   17 2 * * * /opt/batchbench/examples/cron-nightly.sh || echo "batchbench nightly: exit $?"
#
# The history lives in one file on this machine; every night's directory (runs, trend.html,
# gate.json) stays under $NIGHTS.
set -eu
cd "$(dirname "$0")/.."
NIGHTS=${NIGHTS:-/var/lib/batchbench/nights}
export BATCHBENCH_HISTORY=${BATCHBENCH_HISTORY:-/var/lib/batchbench/history.sqlite}
night="$NIGHTS/$(date -u +%Y%m%d-%H%M%S)"
make setup >/dev/null
exec .venv/bin/batchbench nightly --suite "${SUITE:-cpu-nightly}" --out "$night" \
    --json "$night.gate.json" --junit-xml "$night.gate.xml"
