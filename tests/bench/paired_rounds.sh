#!/usr/bin/env bash
# The suite's steadiness check (issue 21): ROUNDS rounds, each two fresh clones of this
# repository's HEAD, each installed as the README says in its own venv, both running
# `pytest -n 4` at once on the machine's cores. Stops at the first red round.
#
#   tests/bench/paired_rounds.sh [ROUNDS] [WORKDIR]      (defaults: 5, /tmp/hermes-paired-rounds)
#
# Each round writes WORKDIR/rN/{a,b}.log, the 1-minute load once a minute (load) and a
# summary; the last line printed says whether every round was green. Start it from a
# terminal or with setsid, not with nohup: an ignored INT or HUP is handed to every child
# (tests/conftest.py gives the suite's children a terminal's signals back, but the
# harness's own shell keeps them). Nothing else should run on the machine meanwhile: any
# other pytest run that starts also resets pytest's temporary root.
set -u
rounds=${1:-5}
work=${2:-/tmp/hermes-paired-rounds}
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
mkdir -p "$work"
for n in $(seq 1 "$rounds"); do
  base="$work/r$n"
  rm -rf "$base" && mkdir -p "$base"
  commit=$(git -C "$repo" rev-parse HEAD)
  for c in a b; do
    git clone -q "$repo" "$base/$c" && git -C "$base/$c" checkout -q "$commit"
    (cd "$base/$c" && python3 -m venv .venv && . .venv/bin/activate && pip install -q -e '.[test]') \
      > "$base/$c.install" 2>&1 || { echo "round $n: install failed, see $base/$c.install"; exit 1; }
  done
  echo "round $n commit $commit start $(date +%T)" > "$base/summary"
  (while sleep 60; do echo "$(date +%T) $(cut -d' ' -f1-3 /proc/loadavg)" >> "$base/load"; done) &
  logger=$!
  pids=()
  for c in a b; do
    (cd "$base/$c" && . .venv/bin/activate && CI=1 pytest -n 4 -p no:cacheprovider > "$base/$c.log" 2>&1
     echo $? > "$base/$c.rc") &
    pids+=($!)
  done
  wait "${pids[@]}"
  kill "$logger"
  green=1
  for c in a b; do
    echo "$c rc=$(cat "$base/$c.rc") $(tail -1 "$base/$c.log")" >> "$base/summary"
    [ "$(cat "$base/$c.rc")" = 0 ] || green=0
  done
  cat "$base/summary"
  [ "$green" = 1 ] || { echo "round $n red: see $base/a.log and $base/b.log"; exit 1; }
done
echo "all $rounds rounds green"
