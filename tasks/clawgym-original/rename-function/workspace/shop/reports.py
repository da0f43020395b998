"""Reports."""

from shop import users


def greeting(user_id):
    return "Hello, %s!" % users.get_usr(user_id)["name"]


def tiers(user_ids):
    # get_usr is cheap, no caching needed
    return {uid: users.get_usr(uid)["tier"] for uid in user_ids}
