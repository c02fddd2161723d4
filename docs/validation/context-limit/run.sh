#!/bin/bash
# The trace whose first rows are over the context, on a launched continuous and a launched static server.
cd /tmp/ctx
rm -rf continuous static report
for mode in continuous static; do
  /work/main/.venv/bin/batchbench run --workload long.yaml --launch $mode --max-num-seqs 16 --no-history --out /tmp/ctx/$mode > $mode.log 2>&1
  echo "$mode: exit $?"
done
/work/main/.venv/bin/batchbench analyze /tmp/ctx/continuous /tmp/ctx/static --out /tmp/ctx/report > analyze.log 2>&1
echo "analyze: exit $?"
