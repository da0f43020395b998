"""Human-friendly durations for the scheduler's config files."""


def parse_duration(text: str) -> int:
    """Return the number of seconds in ``text``.

    Accepted forms:
    - a plain non-negative integer: seconds ("90" -> 90)
    - one or more <integer><unit> parts with units d, h, m, s, in that order (each unit at most
      once), optionally separated by spaces: "2d", "1h30m", "1h 5m 10s", "45s"
    - letter case and surrounding whitespace do not matter ("1H30M " -> 5400)

    Anything else raises ValueError: "", "5x", "h", "1.5h", "-3m", "30m1h" (wrong order),
    "1h1h" (repeated unit).
    """
    raise NotImplementedError


def format_duration(seconds: int) -> str:
    """The inverse of parse_duration: the shortest canonical form, largest units first, no spaces.

    0 -> "0s", 90 -> "1m30s", 3600 -> "1h", 93784 -> "1d2h3m4s". Negative input raises ValueError.
    """
    raise NotImplementedError
