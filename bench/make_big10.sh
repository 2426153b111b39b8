#!/bin/bash
# The 10 M-chunk file of the performance targets: 3 M retained messages on distinct topics and 2 M QoS 1
# messages queued for the 2,000 offline sessions (3 M + 3 M + 2 M + 2 M chunks, about 1.44 GB), made by a
# real broker with ../shared/tools/make-big-db.sh.
#
# usage: bench/make_big10.sh [OUTPUT]   (default ../big/big10.db beside the checkout, or $MOSQDB_BIG10)
# Needs about 3 GB free beside OUTPUT and its temp dir; takes a quarter of an hour or more on 2 busy cores.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-${MOSQDB_BIG10:-$(cd "$(dirname "$0")/../.." && pwd)/big/big10.db}}
TOOL=${MAKE_BIG_DB:-$HERE/../../shared/tools/make-big-db.sh}
BIG_QUEUED=2000000 BIG_CLIENTS=2000 exec bash "$TOOL" "$OUT" 3000000
