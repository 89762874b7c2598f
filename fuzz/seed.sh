#!/bin/sh
# Seed fuzz/corpus/check_file from the shipped architecture and workload files and the bad corpus, in the
# target's input layout (`MAIN \0--\0 WHICH OTHER`). Run from the crate root.
set -eu
out=fuzz/corpus/check_file
mkdir -p "$out"
part=architectures/parts/b200-gb200.ron
n=0
for f in architectures/*.ron architectures/parts/*.ron workloads/*.ron tests/bad/*.ron tests/bad/parts/*.ron; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    # alone, and with the B200 part stored where the shipped system refers to it
    cp "$f" "$out/seed-$n-alone"
    { cat "$f"; printf '\000--\000\000'; cat "$part"; } > "$out/seed-$n-with-part"
done
echo "$n files seeded into $out"
