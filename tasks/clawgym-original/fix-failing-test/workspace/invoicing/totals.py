"""Invoice totals. Amounts are in cents (int) to avoid float drift."""


def line_total(unit_cents, quantity):
    """Price of one invoice line."""
    return unit_cents * quantity


def invoice_total(lines, discount_pct=0, tax_pct=0):
    """Total in cents: sum the lines, apply the discount, then add tax on the discounted amount.

    Each step rounds half up to a whole cent.
    """
    subtotal = sum(line_total(u, q) for u, q in lines)
    taxed = subtotal + int(subtotal * tax_pct / 100)
    return taxed - int(taxed * discount_pct / 100)
