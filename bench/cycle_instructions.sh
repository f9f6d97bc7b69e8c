#!/usr/bin/env bash
# Instructions per scheduling cycle (and per preemption evaluation) of two source trees,
# counted by valgrind's callgrind: repeatable whatever else the machine is doing, where
# CPU time on this shared machine moves by tens of percent between runs.
#
#   bash bench/cycle_instructions.sh BEFORE_TREE AFTER_TREE [NODES]
#
# Each tree is a checkout (or `git archive` of one) holding scheduler/ and bench/; both
# run with this checkout's .venv. bench.cycle runs with --repeat 1 and --repeat 21; the
# difference over 20 cycles is one cycle's count, fixed start-up costs cancelled. The
# garbage collector is off (a full collection of the cluster would land in one window or
# the other by chance) and PYTHONHASHSEED is fixed; sets of objects hashed by address
# still iterate in a per-process order, which moves paths with early exits by a few
# percent either way. Two callgrind processes run at once (one per tree): about 15 min
# at 1000 nodes.
set -euo pipefail
before=$(cd "$1" && pwd) after=$(cd "$2" && pwd) nodes=${3:-1000}
py="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python"
out=$(mktemp -d)
export PYTHONHASHSEED=0
count() { # tree label args...
  local tree=$1 label=$2; shift 2
  (cd "$tree" && PYTHONPATH="$tree" valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    "$py" -c "import gc, runpy, sys; gc.disable(); sys.argv = ['bench.cycle', *sys.argv[1:]]; runpy.run_module('bench.cycle', run_name='__main__')" \
    "$@" > "$out/$label.out" 2> "$out/$label.err")
  grep -o 'Collected : [0-9]*' "$out/$label.err" | awk '{print $3}' > "$out/$label.n"
}
printf '%-40s %14s %14s %7s\n' "cycle ($nodes nodes)" before after ratio
for what in "plain:--shapes plain" "required-anti:--shapes required-anti" \
    "required-affinity:--shapes required-affinity" "preemption evaluation:--preemption"; do
  name=${what%%:*} args=${what#*:}
  for k in 1 21; do
    echo "  $name, --repeat $k ..." >&2
    # shellcheck disable=SC2086
    count "$before" "b$k" --nodes "$nodes" --repeat "$k" $args &
    # shellcheck disable=SC2086
    count "$after" "a$k" --nodes "$nodes" --repeat "$k" $args &
    wait
  done
  b=$(( ($(cat "$out/b21.n") - $(cat "$out/b1.n")) / 20 ))
  a=$(( ($(cat "$out/a21.n") - $(cat "$out/a1.n")) / 20 ))
  printf '%-40s %14d %14d %7s\n' "$name" "$b" "$a" "$("$py" -c "print(f'{$a / $b:.3f}')")"
done
rm -rf "$out"
