"""contamscope.report."""
