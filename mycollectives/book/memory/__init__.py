"""Chapter 1's and lab 1's figures (``plots``), and lab 1's recorded GPU run read back (``recorded``)."""
