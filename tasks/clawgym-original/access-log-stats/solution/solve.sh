set -e
mkdir -p output
python3 - <<'PY'
import collections, json, re
pat = re.compile(r'(\S+) \S+ \S+ \[[^\]]+\] "\S+ (\S+) [^"]*" (\d{3}) (\d+|-)')
status, paths, ips, total, sent = collections.Counter(), collections.Counter(), set(), 0, 0
for line in open("logs/access.log"):
    m = pat.match(line)
    if not m:
        continue
    total += 1
    ips.add(m.group(1)); paths[m.group(2).split("?")[0]] += 1; status[m.group(3)] += 1
    sent += 0 if m.group(4) == "-" else int(m.group(4))
errors = sum(v for k, v in status.items() if k[0] in "45")
json.dump({"total_requests": total, "unique_ips": len(ips), "status_counts": dict(status),
           "top_path": paths.most_common(1)[0][0], "error_rate": round(errors / total, 3),
           "bytes_sent": sent}, open("output/stats.json", "w"), indent=2)
PY
