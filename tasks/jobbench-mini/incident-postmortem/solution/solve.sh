set -e
mkdir -p output
python3 - <<'PY'
import csv, json
failed = sum(int(r["failed_requests"]) for r in csv.DictReader(open("input/requests.csv"))
             if "2026-11-18T14:07" <= r["minute"] < "2026-11-18T14:52")
json.dump({"duration_minutes": 45, "failed_requests": failed}, open("output/impact.json", "w"), indent=2)
open("output/postmortem.md", "w").write(f"""# Postmortem: checkout-api outage, 2026-11-18

## Summary

Release v4.12.0 of checkout-api lowered the database connection-pool maximum from 50 to 5.
Under normal Wednesday traffic the pool ran out, and checkout requests failed with
"timeout acquiring connection from pool" for 45 minutes until the release was rolled back.

## Impact

- Duration: 45 minutes (14:07 alert to 14:52 resolution).
- Failed requests: {failed:,} checkout API requests.
- About 40 customer support tickets about failed checkouts.

## Timeline

- 13:58 v4.12.0 deployed, including the pool change (max 50 -> 5).
- 14:07 Pager alert: checkout-api 5xx rate above 2 %.
- 14:15 Errors identified as connection-pool timeouts; the database itself is healthy.
- 14:21 Traffic confirmed normal; no spike.
- 14:26 v4.12.0 suspected; rollback decided.
- 14:38 Rollback stuck: the canary health check timed out from the same pool exhaustion.
- 14:44 Canary skipped; all pods rolled back directly.
- 14:49 v4.11.3 running on all pods.
- 14:52 Alert resolved.

## Root cause

The pool maximum was cut from 50 to 5 to reduce idle connections. Five connections per pod
cannot serve normal checkout traffic, so requests queued for a connection and timed out.
The change was a configuration value in a routine release, and no load test covered it.
The rollback took longer because the canary health check depends on the same pool and failed
during warm-up, which added about 13 minutes.

## Action items

- Add a load test to the release pipeline that runs at normal peak traffic (owner: jun)
- Require review by the database team for connection-pool settings (owner: amelia)
- Add a rollback path that can bypass the canary when the canary shares the failure (owner: jun)
- Alert on pool wait time, not only on 5xx rate, to catch exhaustion earlier (owner: amelia)
""")
PY
