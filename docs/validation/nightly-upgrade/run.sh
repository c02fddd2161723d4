#!/bin/bash
# Nights 1-2 on the plain build (night 2 accepted whatever its verdict: the baseline is two nights),
# night 3 on the build slowed 10%, night 4 on an unslowed new build.
cd /tmp/nightly
export BATCHBENCH_HISTORY=/tmp/nightly/history.sqlite
rm -f $BATCHBENCH_HISTORY
i=0
for n in plain plain+accept slow10 newbuild; do
  i=$((i+1))
  suite=${n%+accept}; flag=""; [ "$n" != "$suite" ] && flag="--accept"
  /work/main/.venv/bin/batchbench nightly --suite suite-$suite.yaml $flag --out /tmp/nightly/night$i-$suite --json /tmp/nightly/night$i-$suite.json > /tmp/nightly/night$i.log 2>&1
  echo "night $i ($n): exit $?"
done
# Night 5 (run after the first four): the slowed build again, with up to 4 extra repetitions when inconclusive.
