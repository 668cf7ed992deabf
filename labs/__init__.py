"""The book's labs: the notebooks' scripts live in ``labs.scripts``."""
