set -e
python3 - <<'PY'
from pathlib import Path
p = Path("invoicing/totals.py")
src = p.read_text()
old = src[src.index("    subtotal = sum("):]
new = '''    subtotal = sum(line_total(u, q) for u, q in lines)
    discounted = subtotal - _round_half_up(subtotal * discount_pct / 100)
    return discounted + _round_half_up(discounted * tax_pct / 100)


def _round_half_up(value):
    """Round a non-negative amount half up to a whole cent (int() truncates, round() is banker's)."""
    return int(value + 0.5)
'''
p.write_text(src.replace(old, new))
PY
