set -e
mkdir -p output
cat > output/memo.md <<'MD'
# Memo: sensor housing supplier (RFQ-2026-044)

To: Procurement committee
From: Procurement analyst

## Summary

We recommend **Tallis Industrial** as the supplier of sensor housings. It meets every
requirement and has the lowest first-year cost of the compliant vendors: **EUR 221,700**
for 12,000 units including its setup fee. Two cheaper quotes fail a requirement and were excluded.

## Comparison

| Vendor | First-year cost (EUR) | Lead time <= 10 days | Defect rate <= 1.0 % | Warranty >= 12 months | Meets all |
|---|---:|---|---|---|---|
| Lumen Parts | 205,200 | no (14 days) | yes (0.6 %) | yes (24) | no |
| Orbis Components | 216,300 | yes (9 days) | no (1.4 %) | yes (12) | no |
| Tallis Industrial | 221,700 | yes (10 days) | yes (0.9 %) | yes (18) | yes |
| Kestrel Supply | 222,800 | yes (7 days) | yes (0.8 %) | yes (12) | yes |

First-year cost = unit price x 12,000 units + one-off setup fee.

## Recommendation

Award the contract to Tallis Industrial at EUR 221,700 for the first year.

- Lumen Parts is the cheapest quote, but its 14-day lead time is above our 10-day maximum.
- Orbis Components is excluded because its defect rate of 1.4 % is above the 1.0 % limit.
- Kestrel Supply meets every requirement but costs EUR 1,100 more than Tallis in year one.

Tallis also offers an 18-month warranty, six months more than required.

## Risks

- **Lead time at the limit**: Tallis quotes exactly 10 days, so any delay breaches our maximum.
  Mitigation: hold two weeks of safety stock and add a late-delivery penalty to the contract.
- **Higher setup fee**: EUR 4,500 is paid up front; if we switch supplier within a year the
  saving over Kestrel is lost. Mitigation: agree a 12-month minimum term before paying the fee.
- **Single source**: one supplier for all volume. Mitigation: keep Kestrel Supply qualified as
  a backup.
MD
