"""contamscope.cli."""
