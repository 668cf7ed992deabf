"""Placeholder."""


def agreement(*a, **k):
    raise NotImplementedError
