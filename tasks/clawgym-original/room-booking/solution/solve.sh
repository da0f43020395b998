set -e
mkdir -p output
python3 - <<'PY'
import csv
rooms = sorted(csv.DictReader(open("input/rooms.csv")), key=lambda r: (int(r["capacity"]), r["room"]))
meetings = sorted(csv.DictReader(open("input/meetings.csv")), key=lambda m: (m["start"], m["id"]))
busy = {r["room"]: [] for r in rooms}
result = {}
for m in meetings:
    result[m["id"]] = "UNASSIGNED"
    for r in rooms:
        free = all(m["end"] <= s or m["start"] >= e for s, e in busy[r["room"]])
        if int(r["capacity"]) >= int(m["attendees"]) and free:
            busy[r["room"]].append((m["start"], m["end"]))
            result[m["id"]] = r["room"]
            break
with open("output/assignments.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["meeting_id", "room"]); w.writerows(sorted(result.items()))
open("output/unassigned.txt", "w").write("".join(k + "\n" for k, v in sorted(result.items()) if v == "UNASSIGNED"))
PY
