"""Run in every page's kernel by the book's build (the Makefile sets IPYTHONDIR here).

Every PNG a page draws then records the smallest font it was drawn with, which
the browser test reads (``mycollectives.book.figrecord``). Importing the package
installs nothing: the book opts in here.
"""

from mycollectives.book.figrecord import install_in_notebook

install_in_notebook()
