"""Recipes: ``<name>.yaml`` files of training flags, and folders a GPU run launches from (``launch.py``)."""
