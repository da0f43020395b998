set -e
cat > scripts/cleanup.sh <<'SH'
#!/usr/bin/env bash
# Delete *.tmp and *.part regular files under DIR older than DAYS days; print how many.
usage() { echo "usage: cleanup.sh DIR DAYS  (DAYS: whole number of days)" >&2; exit 2; }
[ $# -eq 2 ] || usage
dir="$1"; days="$2"
[[ "$days" =~ ^[0-9]+$ ]] || usage
[ -d "$dir" ] || usage
count=0
while IFS= read -r -d '' f; do
  rm -f -- "$f" && count=$((count + 1))
done < <(find -P "$dir" -type f \( -name '*.tmp' -o -name '*.part' \) -mtime +"$((days - 1))" -print0)
echo "$count"
SH
chmod +x scripts/cleanup.sh
