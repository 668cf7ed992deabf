"""What the book's pages use and the library never does.

``exercises``: the checks under every exercise (each prints ``not answered
yet`` until the reader answers); ``bench``, ``memory``, ``parallel`` and
``viz``: the page helpers and chapter figures of those parts of the library
(a local world's timings, symmetric memory timed three ways, recorded runs
read back, chapter 1's and 5's figures, chapter 5's checks of every strategy,
the validation table, the drawing of the layers); ``layers``: the layers and
the import graph a test holds the package to; ``figrecord``: every PNG a
page's kernel writes records its smallest font, for the browser test (a
page's kernel opts in through ``_ipython``'s startup file);
``virtual_lesson``: the bucketed step and the exercise of the page on the
virtual cluster; ``ddp_calculator``: that page's DDP step against chapter 5's
step-time calculator. No module of the package outside this one imports it
(:mod:`mycollectives.book.layers` puts it in a layer of its own, above the
library's).
"""
