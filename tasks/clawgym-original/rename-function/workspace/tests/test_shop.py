import unittest

from shop.orders import price_for
from shop.reports import greeting, tiers
from shop.users import get_usr


class ShopTest(unittest.TestCase):
    def test_lookup(self):
        self.assertEqual(get_usr(2)["name"], "Mei")

    def test_price(self):
        self.assertEqual(price_for(1, 100), 90.0)

    def test_reports(self):
        self.assertEqual(greeting(1), "Hello, Ravi!")
        self.assertEqual(tiers([1, 2]), {1: "gold", 2: "basic"})


if __name__ == "__main__":
    unittest.main()
