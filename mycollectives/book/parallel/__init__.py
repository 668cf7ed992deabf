"""Chapter 5's page helpers: every strategy checked against the unsharded reference
(``checks``, also ``python -m`` under ``torchrun``), and the step-time calculator's
figures and notebook panel (``plots``)."""
