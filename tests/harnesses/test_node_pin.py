"""The Node pin (harnesses/node_pin/pin.cjs) on the real cached Node 24: pinned clock, seeded UUIDs, nothing else."""

from __future__ import annotations

import json
import subprocess

from harnesses.npm import PIN_EPOCH_MS, pin_env

PROBE = """
import {randomUUID, randomBytes} from "node:crypto";
const t0 = Date.now(), d = new Date();
await new Promise(r => setTimeout(r, 300));  // timers are monotonic: they fire with Date frozen
console.log(JSON.stringify({t0, iso: d.toISOString(), elapsed: Date.now() - t0, explicit: new Date(0).getTime(),
  uuids: [randomUUID(), crypto.randomUUID(), require_("node:crypto").randomUUID()], bytes: randomBytes(8).toString("hex"),
  isDate: d instanceof Date}));
"""


def probe(env: dict[str, str]) -> dict:
    """Run PROBE under ``env``, the sandbox's ``--require`` pointed at the host copy of what it binds."""
    from clawgym_env.harness_install import cache_root, node_bin_dir
    from harnesses.npm import PIN_INSIDE, pin_mount

    assert env["NODE_OPTIONS"] == f"--require={PIN_INSIDE}/pin.cjs"
    env = {**env, "NODE_OPTIONS": f"--require={pin_mount().host / 'pin.cjs'}"}
    script = "import {createRequire} from 'node:module'; const require_ = createRequire(import.meta.url);" + PROBE
    out = subprocess.run(
        [str(node_bin_dir(cache_root()) / "node"), "--input-type=module", "-e", script],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)


def test_clock_starts_at_the_pin_and_advances_and_uuids_repeat_across_processes() -> None:
    a, b = probe(pin_env()), probe(pin_env())
    assert a["t0"] == PIN_EPOCH_MS and a["iso"] == "2026-01-01T00:00:00.000Z"
    assert a["elapsed"] == 0  # frozen (the default): no minute stamp or duration can differ between runs
    real = probe(pin_env(rate=1.0))
    assert abs(real["t0"] - PIN_EPOCH_MS) < 5_000 and 250 <= real["elapsed"] < 10_000  # rate 1: real durations
    assert a["explicit"] == 0 and a["isDate"]  # dates built from a value are untouched
    assert a["uuids"] == b["uuids"] and len(set(a["uuids"])) == 3  # node:crypto, Web Crypto, CommonJS: one sequence
    assert a["uuids"][0][14] == "4" and a["uuids"][0][19] in "89ab"  # still RFC 4122 version 4
    assert a["bytes"] != b["bytes"]  # randomBytes is left real
    c = probe(pin_env(seed="other"))
    assert c["uuids"] != a["uuids"]
