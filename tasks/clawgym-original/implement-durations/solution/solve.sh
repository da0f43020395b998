set -e
cat > durations.py <<'PY'
"""Human-friendly durations for the scheduler's config files."""

import re

_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
_PATTERN = re.compile(r"(?:(\d+)d)? *(?:(\d+)h)? *(?:(\d+)m)? *(?:(\d+)s)?")


def parse_duration(text: str) -> int:
    """Return the number of seconds in ``text`` (see the task's accepted forms)."""
    s = text.strip().lower()
    if s.isdigit():
        return int(s)
    m = _PATTERN.fullmatch(s)
    if not s or not m or not any(m.groups()):
        raise ValueError(f"not a duration: {text!r}")
    return sum(int(g) * size for g, (_, size) in zip(m.groups(), _UNITS) if g)


def format_duration(seconds: int) -> str:
    """The shortest canonical form, largest units first, no spaces."""
    if seconds < 0:
        raise ValueError("negative duration")
    parts = []
    for unit, size in _UNITS:
        n, seconds = divmod(seconds, size)
        if n:
            parts.append(f"{n}{unit}")
    return "".join(parts) or "0s"
PY
