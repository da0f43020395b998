// Preloaded into a Node harness (NODE_OPTIONS=--require) so that two runs of one task send the
// same bytes: the wall clock (Date) starts at CLAWGYM_PIN_EPOCH_MS when the process starts and
// advances at CLAWGYM_PIN_RATE times real time (1: real durations; 0: frozen, so a minute stamp or a
// "took 12 ms" cannot differ between a slow and a fast run; timers and performance.now() run on the
// monotonic clock and stay real either way), and crypto.randomUUID draws from a sequence seeded by
// CLAWGYM_PIN_SEED (node:crypto and Web Crypto alike). Nothing else is touched: crypto.randomBytes, Math.random
// and the monotonic clocks stay real. The harness's own code is not modified.
"use strict";
const crypto = require("node:crypto");

const epoch = Number(process.env.CLAWGYM_PIN_EPOCH_MS);
if (Number.isFinite(epoch)) {
  const RealDate = Date;
  const realNow = RealDate.now.bind(RealDate);
  const start = realNow();
  const rate = Number(process.env.CLAWGYM_PIN_RATE ?? "1");
  const now = () => epoch + Math.floor((realNow() - start) * rate);
  class PinnedDate extends RealDate {
    constructor(...args) {
      if (args.length === 0) super(now());
      else super(...args);
    }
    static now() {
      return now();
    }
  }
  globalThis.Date = PinnedDate;
}

const seed = process.env.CLAWGYM_PIN_SEED;
if (seed) {
  let counter = 0;
  const randomUUID = function randomUUID() {
    const b = crypto.createHash("sha256").update(`${seed}:${counter++}`).digest();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const h = b.subarray(0, 16).toString("hex");
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
  };
  crypto.randomUUID = randomUUID; // node:crypto (CommonJS and, once synced, ES module imports)
  if (globalThis.crypto) globalThis.crypto.randomUUID = randomUUID; // Web Crypto
  require("node:module").syncBuiltinESMExports();
}
