"""One module per revision. Never edit a revision that has been released: add a new one."""
