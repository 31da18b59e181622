#!/usr/bin/env bash
# Stop the daemons scripts/slurm_start.sh started, by the PIDs it recorded (never by name).
set -uo pipefail
STATE="${CONCEPTLAB_SLURM_DIR:-/tmp/conceptlab-slurm}"
PIDS="$STATE/pids"
[ -f "$PIDS" ] || { echo "slurm_stop: nothing recorded in $PIDS" >&2; exit 0; }
# Stop in reverse order of starting: slurmd, slurmctld, then munged.
tac "$PIDS" | while read -r name pid; do
    [ -n "${pid:-}" ] || continue
    # Only a live process with the recorded daemon name (a PID may have been reused since).
    if kill -0 "$pid" 2>/dev/null && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ]; then
        kill "$pid" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
        echo "slurm_stop: stopped $name ($pid)" >&2
    fi
done
rm -f "$PIDS"
