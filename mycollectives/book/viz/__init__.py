"""Figures and tables of the book's appendices: the package's import graph by layer
(``layers``) and the simulator's validation table (``validation``)."""
