"""URL slugs for article titles."""

import re
import unicodedata


def slugify(text, max_len=None, sep="-"):
    """Turn ``text`` into a URL slug.

    - accents are removed ("Crème" -> "creme") and other non-ASCII characters dropped
    - the result is lowercase
    - every run of characters other than a-z and 0-9 becomes a single ``sep``
    - there is never a leading or trailing ``sep``
    - with ``max_len``, the slug is cut to at most ``max_len`` characters at a word boundary;
      only when the first word alone is longer than ``max_len`` is it cut mid-word
    """
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    words = re.split(r"[^a-z0-9]+", ascii_text.lower())
    slug = sep.join(w for w in words if w)
    if max_len is not None and len(slug) > max_len:
        cut = slug[: max_len + 1]
        if sep in cut:
            slug = cut[: cut.rindex(sep)]
        else:
            slug = slug[:max_len]
    return slug
