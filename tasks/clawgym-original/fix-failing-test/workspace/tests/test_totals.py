import unittest

from invoicing.totals import invoice_total, line_total


class TotalsTest(unittest.TestCase):
    def test_line_total(self):
        self.assertEqual(line_total(250, 4), 1000)

    def test_no_discount_no_tax(self):
        self.assertEqual(invoice_total([(1000, 1), (250, 2)]), 1500)

    def test_tax_only_rounds_half_up(self):
        # 1005 * 10% = 100.5 -> 101
        self.assertEqual(invoice_total([(1005, 1)], tax_pct=10), 1106)

    def test_discount_before_tax(self):
        # 2000 - 15% = 1700; + 20% tax = 340 -> 2040
        self.assertEqual(invoice_total([(1000, 2)], discount_pct=15, tax_pct=20), 2040)


if __name__ == "__main__":
    unittest.main()
