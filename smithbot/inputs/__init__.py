"""Inputs for extracted tasks, built from the data layouts every inference engine shares (``layouts/``) and bound to
a launcher's parameters by name (``plan.py``)."""
