#!/usr/bin/env bash
# Seed 000's "last compaction" check: where did the log cleaner last reach in a partition?
# It reads the partition with kcat and reports the largest jump between consecutive offsets (the
# first one when several tie) with the time of the record after it. Compaction leaves such gaps
# where it removed superseded records; the cleaner's own answer is its first dirty offset.
#
# usage: last-compaction.sh BROKER TOPIC [PARTITION]
#
# The seed's text is not in shared/: this is the script as the issues describe it (kcat piped
# into gawk, largest offset gap and its time), kept here and run unchanged by
# tests/broker/test_clients_seed000.py.
set -euo pipefail
kcat -b "$1" -C -t "$2" -p "${3:-0}" -o beginning -e -q -f '%o %T\n' |
  gawk '
    NR > 1 && $1 - prev > gap { gap = $1 - prev; after = $1; ts = $2 }
    { prev = $1 }
    END {
      if (gap > 1)
        printf "last compaction: %d offsets removed before offset %d (%s UTC)\n",
          gap - 1, after, strftime("%Y-%m-%d %H:%M:%S", int(ts / 1000), 1)
      else
        print "no compaction gap"
    }'
