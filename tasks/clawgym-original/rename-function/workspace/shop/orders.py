"""Order pricing."""

from shop.users import get_usr

DISCOUNT = {"gold": 0.1, "basic": 0.0}


def price_for(user_id, amount):
    user = get_usr(user_id)
    return round(amount * (1 - DISCOUNT[user["tier"]]), 2)
