"""User lookups."""

_USERS = {1: {"id": 1, "name": "Ravi", "tier": "gold"}, 2: {"id": 2, "name": "Mei", "tier": "basic"}}


def get_usr(user_id):
    """Return the user record for ``user_id`` or raise KeyError."""
    return dict(_USERS[user_id])
