"""In-tree plugins, one module per plugin, named as upstream's. See registry.py."""
