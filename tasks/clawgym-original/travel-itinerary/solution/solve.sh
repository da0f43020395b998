set -e
mkdir -p output
python3 - <<'PY'
import csv, json
from datetime import datetime
flights = list(csv.DictReader(open("input/flights.csv")))
t = datetime.fromisoformat
day = "2026-12-14"
opts = []
for a in flights:
    if a["from"] != "LIS" or not a["depart_utc"].startswith(day):
        continue
    if a["to"] == "HEL" and a["arrive_utc"].startswith(day):
        opts.append(([a["flight"]], int(a["price_eur"]), a["arrive_utc"]))
    for b in flights:
        if b["from"] == a["to"] and b["to"] == "HEL" and b["arrive_utc"].startswith(day) \
                and (t(b["depart_utc"]) - t(a["arrive_utc"])).total_seconds() >= 3600:
            opts.append(([a["flight"], b["flight"]], int(a["price_eur"]) + int(b["price_eur"]), b["arrive_utc"]))
pack = lambda o: {"flights": o[0], "price_eur": o[1], "arrival_utc": o[2]}
json.dump({"cheapest": pack(min(opts, key=lambda o: (o[1], o[2]))),
           "earliest_arrival": pack(min(opts, key=lambda o: (o[2], o[1])))},
          open("output/itineraries.json", "w"), indent=2)
PY
