#!/usr/bin/env bash
# Hidden grader for tmp-cleanup-script: runs the agent's script on fresh fixtures and prints the
# share of checks passed as the last line. Uses bash + coreutils + find only. Checks of restraint
# (exit 0, files kept, links not followed) count only when the script also deleted what it had to:
# a script that does nothing keeps everything and must not earn credit for it.
# The agent's script runs in the grading jail ($CLAWGYM_RUN_AGENT, set by ClawGym's script driver):
# it cannot read this file or reach this process, and may change only the fixtures under $tmp.
ws="${CLAWGYM_WORKSPACE:-$PWD}"
script="$ws/scripts/cleanup.sh"
if [ ! -f "$script" ]; then echo "no scripts/cleanup.sh"; echo 0; exit 0; fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
run() { ${CLAWGYM_RUN_AGENT:?not graded by ClawGym} --cwd "$tmp" --timeout 30 --writable "$tmp" -- bash "$script" "$@"; }
pass=0; total=0
check() { total=$((total + 1)); if eval "$2"; then pass=$((pass + 1)); echo "ok   $1"; else echo "FAIL $1"; fi; }

mk() { mkdir -p "$(dirname "$1")"; echo x > "$1"; touch -d "$2" "$1"; }
root="$tmp/build"; outside="$tmp/outside"
mk "$root/a.tmp" "10 days ago"
mk "$root/b.part" "8 days ago"
mk "$root/deep/nested/c.tmp" "30 days ago"
mk "$root/fresh.tmp" "2 days ago"
mk "$root/keep.log" "40 days ago"
mk "$root/notes.tmp.txt" "40 days ago"
mk "$root/name with space.tmp" "12 days ago"
mkdir -p "$root/old.tmp"; touch -d "40 days ago" "$root/old.tmp"
mk "$outside/victim.tmp" "50 days ago"
ln -s "$outside" "$root/link"

out="$(run "$root" 7 2>/dev/null)"; rc=$?
deleted='[ ! -e "$root/a.tmp" ] && [ ! -e "$root/b.part" ] && [ ! -e "$root/deep/nested/c.tmp" ]'
check "exit code 0" "$deleted"' && [ "$rc" = 0 ]'
check "old .tmp and .part deleted" "$deleted"
check "names with spaces handled" '[ ! -e "$root/name with space.tmp" ]'
check "fresh file kept" "$deleted"' && [ -e "$root/fresh.tmp" ]'
check "other names and directories kept" "$deleted"' && [ -e "$root/keep.log" ] && [ -e "$root/notes.tmp.txt" ] && [ -d "$root/old.tmp" ]'
check "symlink not followed" "$deleted"' && [ -e "$outside/victim.tmp" ]'
check "prints the count last" '[ "$(printf "%s\n" "$out" | tail -n 1 | tr -d "[:space:]")" = 4 ]'

root2="$tmp/second"
mk "$root2/x.tmp" "3 days ago"
mk "$root2/y.part" "1 days ago"
out2="$(run "$root2" 2 2>/dev/null)"; rc2=$?
check "DAYS honoured" '[ "$rc2" = 0 ] && [ ! -e "$root2/x.tmp" ] && [ -e "$root2/y.part" ] && [ "$(printf "%s\n" "$out2" | tail -n 1 | tr -d "[:space:]")" = 1 ]'

mk "$tmp/third/z.tmp" "20 days ago"
run "$tmp/third" >/dev/null 2>&1; rc3=$?
run "$tmp/third" abc >/dev/null 2>&1; rc4=$?
run "$tmp/missing-dir" 3 >/dev/null 2>&1; rc5=$?
check "usage errors exit 2 and delete nothing" "$deleted"' && [ "$rc3" = 2 ] && [ "$rc4" = 2 ] && [ "$rc5" = 2 ] && [ -e "$tmp/third/z.tmp" ]'

echo "$pass/$total checks passed"
awk -v p="$pass" -v t="$total" 'BEGIN { printf "%.4f\n", p / t }'
