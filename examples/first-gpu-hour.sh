#!/usr/bin/env bash
# The first hour on a GPU box, in one command: `gpu-check` (does this install measure what it
# claims on this machine's engine?), then the published setup (`reproduce --preset
# anyscale-2023`), then one archive to send back.
#
#   examples/first-gpu-hour.sh [OUT]     # default OUT: reports/first-gpu-hour-<date>-<host>
#
# Run it after the GPU install (docs/gpu.md). Both commands run whatever the first says: a
# failed check is a finding to send too. Extra flags go through GPU_CHECK_ARGS and PRESET_ARGS
# (e.g. PRESET_ARGS=--quick for a try of two waves per cap); BATCHBENCH names another install's
# command. Exit status: 0 when both exit 0, else the first non-zero one.
set -uo pipefail
cd "$(dirname "$0")/.."
BATCHBENCH=${BATCHBENCH:-.venv/bin/batchbench}
out=${1:-reports/first-gpu-hour-$(date -u +%Y%m%d-%H%M%S)-$(hostname -s)}
if [ ! -x "$BATCHBENCH" ]; then
    echo "first-gpu-hour: $BATCHBENCH not found: install first (docs/gpu.md)" >&2
    exit 2
fi
if [ -e "$out" ]; then
    echo "first-gpu-hour: $out exists: name a new directory" >&2
    exit 2
fi
mkdir -p "$out"

echo "== 1/2 gpu-check: the installation's verdict ($out/gpu-check)"
# shellcheck disable=SC2086
"$BATCHBENCH" gpu-check --out "$out/gpu-check" ${GPU_CHECK_ARGS:-} 2>&1 | tee "$out/gpu-check.log"
check=${PIPESTATUS[0]}

echo "== 2/2 reproduce --preset anyscale-2023: the published setup ($out/preset)"
# shellcheck disable=SC2086
"$BATCHBENCH" reproduce --preset anyscale-2023 --no-history --out "$out/preset" ${PRESET_ARGS:-} 2>&1 \
    | tee "$out/preset.log"
preset=${PIPESTATUS[0]}

{
    echo "gpu-check exit $check, reproduce --preset anyscale-2023 exit $preset"
    nvidia-smi 2>&1 || echo "nvidia-smi: not found"
    "$(dirname "$BATCHBENCH")/python" -m pip list 2>/dev/null | grep -i -E "^(batchbench|vllm|torch|nvidia-ml-py) " || true
    git rev-parse HEAD 2>&1 || true
} > "$out/machine.txt"

# What to send back: the verdict, the report and its figures, both logs, the machine. The runs'
# step logs and telemetry stay here (hundreds of MB at full size); send them if asked.
archive="$out.tar.gz"
parent=$(dirname "$out") name=$(basename "$out")
wanted=()
for file in gpu-check/verdict.md gpu-check/verdict.json preset/report.md preset/report.html preset/summary.json \
            gpu-check.log preset.log machine.txt; do
    [ -e "$out/$file" ] && wanted+=("$name/$file")
done
tar -czf "$archive" -C "$parent" "${wanted[@]}"
echo "== send back $archive: ${wanted[*]#"$name/"}"
echo "gpu-check exit $check (0: every check passed), reproduce --preset exit $preset (0: report written, stable)"
if [ "$check" -ne 0 ]; then exit "$check"; fi
exit "$preset"
