set -e
cat > tests/test_slug.py <<'PY'
import unittest

from textkit.slug import slugify


class SlugifyTest(unittest.TestCase):
    def test_accents_removed(self):
        self.assertEqual(slugify("crème brûlée"), "creme-brulee")

    def test_lowercase(self):
        self.assertEqual(slugify("Hello World"), "hello-world")

    def test_runs_become_one_separator(self):
        self.assertEqual(slugify("a -- b!!c"), "a-b-c")

    def test_no_leading_or_trailing_separator(self):
        self.assertEqual(slugify("  ...Hello, world!  "), "hello-world")

    def test_custom_separator(self):
        self.assertEqual(slugify("Hello big world", sep="_"), "hello_big_world")

    def test_max_len_cuts_at_word_boundary(self):
        self.assertEqual(slugify("the quick brown fox", max_len=12), "the-quick")

    def test_max_len_exact_fit(self):
        self.assertEqual(slugify("the quick brown", max_len=15), "the-quick-brown")

    def test_max_len_long_first_word(self):
        self.assertEqual(slugify("internationalization rocks", max_len=5), "inter")


if __name__ == "__main__":
    unittest.main()
PY
