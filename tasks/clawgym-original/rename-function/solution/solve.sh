set -e
sed -i 's/\bget_usr\b/get_user/g' shop/orders.py shop/reports.py tests/test_shop.py
sed -i 's/^def get_usr(user_id):/def get_user(user_id):/' shop/users.py
cat >> shop/users.py <<'PY'


def get_usr(user_id):
    """Deprecated alias of get_user."""
    import warnings

    warnings.warn("get_usr is deprecated; use get_user", DeprecationWarning, stacklevel=2)
    return get_user(user_id)
PY
