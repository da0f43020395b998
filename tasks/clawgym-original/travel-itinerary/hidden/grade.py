"""Grader for travel-itinerary: the cheapest-looking pairs have connections under 60 minutes."""
import json
from pathlib import Path

CHEAPEST = (["TP760", "KL1169"], 140, "2026-12-14T16:45")
EARLIEST = (["TP578", "LH850"], 183, "2026-12-14T14:05")


def _check(entry, want):
    flights = [str(f) for f in entry["flights"]]
    return flights == want[0], int(entry["price_eur"]) == want[1] and str(entry["arrival_utc"]).startswith(want[2])


def grade(transcript, workspace_path):
    scores = {"cheapest_flights": 0.0, "cheapest_details": 0.0, "earliest_flights": 0.0, "earliest_details": 0.0}
    try:
        data = json.loads((Path(workspace_path) / "output" / "itineraries.json").read_text(encoding="utf-8"))
    except Exception:
        return scores
    for key, want, prefix in (("cheapest", CHEAPEST, "cheapest"), ("earliest_arrival", EARLIEST, "earliest")):
        try:
            flights_ok, details_ok = _check(data[key], want)
            scores[prefix + "_flights"] = 1.0 if flights_ok else 0.0
            scores[prefix + "_details"] = 1.0 if flights_ok and details_ok else 0.0
        except Exception:
            pass
    return scores
